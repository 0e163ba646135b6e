// The node file's trigger outputs and triggered cameras (CONTRACT §17): parsed into the core's types, every bad
// value one sentence naming its line.
import CoordCore
import Testing
@testable import NodeAgent

private func parsed(_ yaml: String) throws -> (file: NodeFile, warnings: [String]) {
    try NodeFile.parse("version: 1\n" + yaml, path: "node.yaml")
}

private func refusal(_ yaml: String) -> String? {
    do { _ = try NodeFile.parse("version: 1\n" + yaml, path: "node.yaml"); return nil } catch { return error.description }
}

private let outputs = """
    triggers:
      - {name: sync, gpio: {chip: /dev/gpiochip0, line: 17}, width_us: 300, active: low}
      - {name: aux, gpio: {chip: /dev/gpiochip2, line: 4}}

    """

@Suite struct NodeFileTriggerTests {
    @Test func outputsAndBindingsAreRead() throws {
        let (file, warnings) = try parsed(outputs + """
            cameras:
              - {name: mv0, genicam: Fake-1, trigger: {output: sync, source: Line1, activation: FallingEdge, delay_us: 25}}
              - {name: cam0, v4l2: /dev/video0, trigger: {output: aux}}
            """)
        #expect(warnings.isEmpty)
        #expect(file.triggerOutputs == [
            TriggerOutput(name: "sync", chip: "/dev/gpiochip0", line: 17, widthMicroseconds: 300, active: .low),
            TriggerOutput(name: "aux", chip: "/dev/gpiochip2", line: 4, widthMicroseconds: 500, active: .high),
        ])
        #expect(file.cameraTriggers == [
            "mv0": CameraTrigger(output: "sync", source: "Line1", activation: "FallingEdge", delayMicroseconds: 25),
            "cam0": CameraTrigger(output: "aux", source: "Line0", activation: "RisingEdge", delayMicroseconds: 0),
        ])
    }

    @Test func anUnknownKeyUnderATriggerIsWarnedAbout() throws {
        let (_, warnings) = try parsed("triggers:\n  - {name: s, gpio: {chip: /dev/gpiochip0, line: 1, pull: up}}\n")
        #expect(warnings.count == 1 && warnings[0].contains("triggers[0].gpio.pull"))
    }

    @Test(arguments: [
        ("cameras:\n  - {name: mv0, genicam: F, trigger: {output: nope}}\n",
         "node.yaml line 3: cameras[0].trigger.output nope (camera mv0) is not a trigger output of this node (none is declared under triggers)."),
        (outputs + "cameras:\n  - {name: mv0, genicam: F, trigger: {output: nope}}\n",
         "node.yaml line 6: cameras[0].trigger.output nope (camera mv0) is not a trigger output of this node (declared: aux, sync)."),
        ("triggers:\n  - {name: s, gpio: {chip: /dev/video0, line: 1}}\n",
         "node.yaml line 3: triggers[0].gpio.chip must be a GPIO character device such as /dev/gpiochip0 (got \"/dev/video0\")."),
        ("triggers:\n  - {name: s, gpio: {chip: /dev/gpiochip0, line: -1}}\n",
         "node.yaml line 3: triggers[0].gpio.line must be a line offset 0 to 1023 (got -1)."),
        ("triggers:\n  - {name: s, gpio: {chip: /dev/gpiochip0, line: 1}, width_us: 0}\n",
         "node.yaml line 3: triggers[0].width_us must be 1 to 1000000 µs (got 0)."),
        ("triggers:\n  - {name: s, gpio: {chip: /dev/gpiochip0, line: 1}, active: up}\n",
         "node.yaml line 3: triggers[0].active must be high or low (got \"up\")."),
        ("triggers:\n  - {name: s, gpio: {chip: /dev/gpiochip0, line: 1}}\n  - {name: t, gpio: {chip: /dev/gpiochip0, line: 1}}\n",
         "node.yaml line 4: triggers[1] (output t) drives line 1 of /dev/gpiochip0, as an earlier output does."),
        (outputs + "cameras:\n  - {name: s0, synthetic: true, trigger: {output: sync}}\n",
         "node.yaml line 6: cameras[0].trigger (camera s0): a synthetic camera has no trigger input; trigger a GenICam or V4L2 camera."),
        (outputs + "cameras:\n  - {name: mv0, genicam: F, trigger: {output: sync, activation: Up}}\n",
         "node.yaml line 6: cameras[0].trigger.activation must be one of RisingEdge, FallingEdge, LevelHigh, LevelLow, AnyEdge (got \"Up\")."),
    ])
    func aBadValueIsOneSentenceNamingItsLine(yaml: String, sentence: String) {
        let got = refusal(yaml)
        #expect(got == sentence)
    }
}

@Suite struct NodeFileTriggerResolveTests {
    @Test func theNodeFilesTriggersReachTheAgentsConfiguration() throws {
        let file = try NodeFile.parse("version: 1\n" + outputs + "cameras:\n  - {name: mv0, genicam: Fake-1, trigger: {output: sync}}\n",
                                      path: "node.yaml").file
        var flags = NodeFlags()
        flags.name = "n1"
        flags.staging = "/tmp/coord-node-resolve"
        flags.endpoint = "tcp://127.0.0.1:*"
        let c = try NodeConfiguration.resolve(flags: flags, file: file)
        #expect(c.triggerOutputs.map(\.name) == ["sync", "aux"])
        #expect(c.cameraTriggers["mv0"] == CameraTrigger(output: "sync"))
        #expect(c.genicamCameras.map(\.name) == ["mv0"])
    }
}
