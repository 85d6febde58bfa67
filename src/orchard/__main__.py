from orchard.cli import main

main()
