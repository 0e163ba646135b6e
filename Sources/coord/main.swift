import CoordCommands

// coord: the coordinator CLI the operator runs on the control machine (see CoordCommands).
await Coord.runFromCommandLine()
