import NodeCommands

// coord-node: the node agent daemon (see NodeCommands).
await CoordNode.runFromCommandLine()
