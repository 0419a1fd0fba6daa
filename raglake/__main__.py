from raglake.command import console

console()
