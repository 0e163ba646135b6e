import Capture
import CoordCore
import Foundation
import NodeCommands
import Platform
import ScriptedCameras

// coord-node-scripted (tests only, never packaged): coord-node's commands with every V4L2 device a scripted webcam
// described by the JSON file after `--v4l2-script`, so V4L2 takes run on machines without cameras.
var arguments = Array(CommandLine.arguments.dropFirst())
var scriptPath: String?
if let at = arguments.firstIndex(where: { $0 == "--v4l2-script" || $0.hasPrefix("--v4l2-script=") }) {
    let given = arguments[at]
    if given == "--v4l2-script" {
        guard at + 1 < arguments.count else {
            FileHandle.standardError.write(Data("coord-node: --v4l2-script needs a JSON file after it.\n".utf8))
            exit(2)
        }
        scriptPath = arguments[at + 1]
        arguments.removeSubrange(at...(at + 1))
    } else {
        scriptPath = String(given.dropFirst("--v4l2-script=".count))
        arguments.remove(at: at)
    }
}
// `--trigger-log FILE`: every trigger output is a scripted line appending its pulses' rises to FILE.
var triggerLog: String?
if let at = arguments.firstIndex(of: "--trigger-log") {
    guard at + 1 < arguments.count else {
        FileHandle.standardError.write(Data("coord-node: --trigger-log needs a file after it.\n".utf8))
        exit(2)
    }
    triggerLog = arguments[at + 1]
    arguments.removeSubrange(at...(at + 1))
}
let scriptedLine: (@Sendable (TriggerOutput) throws(GPIOFailure) -> any TriggerLine)?
if let triggerLog {
    let log = URL(fileURLWithPath: triggerLog)
    scriptedLine = { @Sendable (output: TriggerOutput) throws(GPIOFailure) -> any TriggerLine in
        try ScriptedTriggerLine(output: output, log: log)
    }
} else {
    scriptedLine = nil
}
await CoordNode.$triggerLine.withValue(scriptedLine) {
    if let scriptPath {
        let url = URL(fileURLWithPath: scriptPath)
        await CoordNode.$v4l2Access.withValue({ seed in try V4L2Access.scripted(url: url, seed: seed) }) {
            await CoordNode.runFromCommandLine(arguments)
        }
    } else {
        await CoordNode.runFromCommandLine(arguments)
    }
}
