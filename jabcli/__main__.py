from jabcli.cli import main

main()
