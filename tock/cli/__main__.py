from tock.cli import main

main()
