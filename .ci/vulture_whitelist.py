"""Names vulture cannot see used (.ci/run's dead-code check, [tool.vulture] in pyproject.toml), each with why.

Reviewed by hand: a name belongs here only when something outside this code's own calls reaches it. Code that
only a test calls is dead, not whitelisted, unless it is how a test observes the product (said below).
"""

# Clients the registry loads by dotted path (protocols/registry.py), never by name.
AfpPythonClient
AfpSpeedtestClient
AiohttpClient
CurlFtpClient
CurlHttpClient
OpenSSHSftpClient
ParamikoClient
RsyncDaemonClient
RsyncSshClient
ScpClient
ScpLegacyClient
SmbclientClient

# Stock servers the lab imports by module and class name (workbench/lab/stock_daemons.py STOCK_SERVERS), and
# explicit-TLS FTP, which has no served counterpart and stands in for a stranger's FTPS server.
StockFtps
StockRsyncd
StockAfpd
StockSmbd
StockSshd
StockWebDav

# Hooks a library calls: paramiko's reply dispatch and security
# options (protocols/sftp.py), smbprotocol's receive deadline, the parameters of paramiko's keyboard-interactive
# handler and of its private request plumbing (typed by a Protocol), and pyftpdlib's filesystem, authorizer
# and handler settings (workbench/server/ftpd.py).
_async_response
ciphers
_receive_timeout
instructions
fileobj
waitfor
ac_in_buffer_size
ac_out_buffer_size
validpath
mkstemp
listdirinfo
isfile
islink
getmtime
validate_authentication
banner
use_sendfile
dtp_handler
abstracted_fs
max_cons

# What typer reads of a command built from the settings table (workbench/cli/options.py), and the text stream
# interface of the guarded console stream (workbench/shared/signals.py).
__signature__
__annotations__
writelines

# Record fields: kept in the run document, a member's messages or the parsed output of a tool, read by name
# from JSON or by dataclasses.asdict, never as attributes here.
multi_credit
zero_copy
encryption
block_bytes
read_bufsize
server_sendfile
whole_file
first_done_host
last_done_host
kernel
cpus
interface
connect_min_s
connect_samples_s
ping_samples_s
sender_bytes_per_s
cpu_local
cpu_remote
strict_host_key_checking
batch_mode
retrans_fraction

# TCP_INFO as the kernel lays it out (workbench/shared/tcpinfo.py): every field is parsed so the offsets of
# the ones used stay right, and the unused ones are there for the next diagnosis.
ca_state
snd_wscale
rcv_wscale
rto_us
rcv_mss
lost
pmtu
rcv_ssthresh
rttvar_us
snd_ssthresh
snd_cwnd
advmss
total_retrans
pacing_rate
bytes_acked
bytes_received
notsent_bytes
delivery_rate
rwnd_limited_fraction
sndbuf_limited_fraction

# How the lab tests see that no client host's sshd outlives the hosts (workbench/lab/client_hosts.py).
sshd_pids

# Exit code 0 (workbench/shared/errors.py ExitCode), and vocabularies written out for readers and tests: the
# ceilings' labels, a fleet aggregate's keys, the TCP limits a triage names, the shipped JSON Schema.
OK
LABELS
AGGREGATE_KEYS
LIMITS
json_schema

# Size limits read by field name (workbench/shared/rtnetlink.py SizeLimits: SIZE_LIMITS, parse_link).
gso_max_segs
gro_max_size_bytes
tso_max_size_bytes
tso_max_segs
