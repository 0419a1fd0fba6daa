from raglake.cli import main

main()
