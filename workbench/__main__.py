from workbench.cli.app import main

main()
