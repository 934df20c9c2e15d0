from tock_cli import main

main()
