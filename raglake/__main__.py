from raglake.cli import console

console()
