import CoordCore
import Testing
@testable import VersionedYAML

/// The console's controls written into the operator's rig file in place (issue 27): only the values that change,
/// every comment, blank line and other value as the operator wrote it.
@Suite("Rig file controls in place")
struct RigFileControlsTests {
    typealias Camera = RigFileControls.Camera

    func edit(_ text: String, _ cameras: [String: [Camera]]) throws(YAMLFileError) -> String {
        try RigFileControls.text(text, path: "rig.yaml", cameras: cameras)
    }

    @Test func blockStyleKeepsEveryCommentAndChangesOnlyTheValuesSet() throws {
        let text = """
        # The studio rig. Do not reorder the nodes: the report follows this order.
        version: 1

        nodes:
          # box 1, stage left
          - name: box1
            endpoint: tcp://10.0.0.11:5710   # the switch's port 3
            cameras:
              - name: cam0        # the wide
                size: 1280x720
                controls:
                  exposure_us: 8000   # daylight
                  white_balance_k: 5600

              # the close-up has no controls yet
              - name: cam1
                priority: 2
          - name: box2
            endpoint: tcp://10.0.0.12:5710
        take:
          fps: 25   # PAL
        # end of file

        """
        let edited = try edit(text, [
            "box1": [Camera(name: "cam0", controls: CameraControls(exposureMicroseconds: 9000, gainDecibels: 1.5, whiteBalanceKelvin: 5600)),
                     Camera(name: "cam1", controls: CameraControls(focus: 0.25))],
        ])
        #expect(edited == """
        # The studio rig. Do not reorder the nodes: the report follows this order.
        version: 1

        nodes:
          # box 1, stage left
          - name: box1
            endpoint: tcp://10.0.0.11:5710   # the switch's port 3
            cameras:
              - name: cam0        # the wide
                size: 1280x720
                controls:
                  exposure_us: 9000   # daylight
                  white_balance_k: 5600
                  gain_db: 1.5

              # the close-up has no controls yet
              - name: cam1
                priority: 2
                controls: {focus: 0.25}
          - name: box2
            endpoint: tcp://10.0.0.12:5710
        take:
          fps: 25   # PAL
        # end of file

        """)
        // Nothing to change: the same text, byte for byte.
        #expect(try edit(edited, ["box1": [Camera(name: "cam0", controls: CameraControls(exposureMicroseconds: 9000))]]) == edited)
    }

    @Test func flowStylesGetEntriesInTheirOwnStyle() throws {
        let text = """
        version: 1
        nodes: [{name: a, endpoint: "tcp://127.0.0.1:5710", cameras: [cam0, {name: cam1, size: 320x240}, {name: cam2, controls: {exposure_us: 1000}}]}]
        """
        let edited = try edit(text, ["a": [Camera(name: "cam0", controls: CameraControls(exposureMicroseconds: 20000)),
                                          Camera(name: "cam1", controls: CameraControls(gainDecibels: -3)),
                                          Camera(name: "cam2", controls: CameraControls(exposureMicroseconds: 2000, whiteBalanceKelvin: 3200))]])
        #expect(edited == """
        version: 1
        nodes: [{name: a, endpoint: "tcp://127.0.0.1:5710", cameras: [{name: cam0, controls: {exposure_us: 20000}}, {name: cam1, size: 320x240, controls: {gain_db: -3.0}}, {name: cam2, controls: {exposure_us: 2000, white_balance_k: 3200}}]}]
        """)
    }

    @Test func aNodeWithoutACameraListGetsOneAndANullControlsKeyAValue() throws {
        let text = """
        version: 1
        nodes:
        - name: a
          endpoint: tcp://127.0.0.1:5710  # no cameras: every camera of the node
        - name: b
          endpoint: tcp://127.0.0.1:5720
          cameras:
          - name: "007"
            controls:
        """
        let edited = try edit(text, ["a": [Camera(name: "cam0", controls: CameraControls(exposureMicroseconds: 5000)),
                                          Camera(name: "007", controls: CameraControls())],
                                     "b": [Camera(name: "007", controls: CameraControls(focus: 0.00001))]])
        #expect(edited == """
        version: 1
        nodes:
        - name: a
          endpoint: tcp://127.0.0.1:5710  # no cameras: every camera of the node
          cameras: [{name: cam0, controls: {exposure_us: 5000}}, "007"]
        - name: b
          endpoint: tcp://127.0.0.1:5720
          cameras:
          - name: "007"
            controls: {focus: 0.00001}
        """)
    }

    @Test func metacharactersInCommentsQuotesAndNamesAreLeftAlone() throws {
        let text = """
        version: 1
        nodes:
          - name: "box-1.a_b"   # "quoted", {braces}, [brackets], &anchor *alias: # more
            endpoint: 'tcp://127.0.0.1:5710'
            cameras:
              - "cam0"   # a quoted name: {name: x, controls: {exposure_us: 1}}
              - name: cam1
                controls: {exposure_us: 8000,   # a } and a , in a comment
                           gain_db: 2}
        """
        let edited = try edit(text, ["box-1.a_b": [Camera(name: "cam0", controls: CameraControls(whiteBalanceKelvin: 4300)),
                                                  Camera(name: "cam1", controls: CameraControls(exposureMicroseconds: 12000, focus: 1))]])
        #expect(edited == """
        version: 1
        nodes:
          - name: "box-1.a_b"   # "quoted", {braces}, [brackets], &anchor *alias: # more
            endpoint: 'tcp://127.0.0.1:5710'
            cameras:
              - {name: "cam0", controls: {white_balance_k: 4300}}   # a quoted name: {name: x, controls: {exposure_us: 1}}
              - name: cam1
                controls: {exposure_us: 12000,   # a } and a , in a comment
                           gain_db: 2, focus: 1.0}
        """)
    }

    @Test func windowsLineEndingsStayAndAFileWithoutAFinalNewlineGetsNone() throws {
        let text = "version: 1\r\nnodes:\r\n  - name: a\r\n    endpoint: tcp://127.0.0.1:5710\r\n    cameras:\r\n      - name: cam0\r\n        size: 640x480"
        let edited = try edit(text, ["a": [Camera(name: "cam0", controls: CameraControls(gainDecibels: 6))]])
        #expect(edited == text + "\r\n        controls: {gain_db: 6.0}")
    }

    @Test func anAnchorSharedByTwoCamerasIsRefusedNotSilentlyChangedForBoth() throws {
        let text = """
        version: 1
        nodes:
          - name: a
            endpoint: tcp://127.0.0.1:5710
            cameras:
              - {name: cam0, controls: &look {exposure_us: 8000, gain_db: 1.0}}
              - {name: cam1, controls: *look}
        """
        #expect(throws: YAMLFileError.self) {
            try edit(text, ["a": [Camera(name: "cam0", controls: CameraControls(exposureMicroseconds: 9000))]])
        }
        do {
            _ = try edit(text, ["a": [Camera(name: "cam0", controls: CameraControls(exposureMicroseconds: 9000))]])
        } catch {
            #expect(error.description.hasPrefix("rig.yaml") && error.description.contains("left as it is"))
        }
        // The camera that only points at the anchor gets its own controls written out in full.
        let edited = try edit(text, ["a": [Camera(name: "cam1", controls: CameraControls(exposureMicroseconds: 9000))]])
        #expect(edited.hasSuffix("- {name: cam1, controls: {exposure_us: 9000, gain_db: 1.0}}"))
    }

    @Test func aFileThatDoesNotLoadOrAValueThatIsNoNumberIsOneSentence() throws {
        for bad in ["version: 1\nnodes: [{name: a, endpoint: tcp://127.0.0.1:5710, cameras: [{name: cam0, controls: {gain_db: \"3 # {x: [y]}\"}}]}]\n",
                    "version: 1\nnodes: [{name: a\n", "version: 1\ntake: {fps: 25}\n"] {
            do {
                _ = try edit(bad, ["a": [Camera(name: "cam0", controls: CameraControls(gainDecibels: 2))]])
                Issue.record("accepted \(bad)")
            } catch {
                #expect(error.description.hasPrefix("rig.yaml") && !error.description.contains("\n"), "\(error.description)")
            }
        }
    }

    @Test func numbersAreWrittenAsPlainDecimalsThatReadBackExactly() {
        #expect(RigFileControls.number(1.5) == "1.5")
        #expect(RigFileControls.number(-3) == "-3.0")
        #expect(RigFileControls.number(0.00001) == "0.00001")
        #expect(RigFileControls.number(1.25e-7) == "0.000000125")
        #expect(RigFileControls.number(2e20) == "200000000000000000000.0")
        for v in [0.1, 1.0 / 3, 123.456e-9, 6.02e23] { #expect(Double(RigFileControls.number(v)) == v) }
        // Zero is written 0.0 whatever its sign (issue 34: `focus: -0.0` landed in a rig file).
        #expect(RigFileControls.number(-0.0) == "0.0")
        #expect(RigFileControls.number(0) == "0.0")
    }

    @Test func aNegativeZeroIsWrittenAsZero() throws {
        let text = """
        version: 1
        nodes:
          - name: a
            endpoint: tcp://127.0.0.1:5710
            cameras: [cam0]
        """
        let edited = try edit(text, ["a": [Camera(name: "cam0", controls: CameraControls(gainDecibels: -0.0, focus: -0.0))]])
        #expect(edited.contains("{gain_db: 0.0, focus: 0.0}"), "\(edited)")
        #expect(!edited.contains("-0"))
    }
}
