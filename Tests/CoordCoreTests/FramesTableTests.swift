import Testing
@testable import CoordCore

private func parseError(_ text: String) -> FramesTable.ParseError? {
    do {
        _ = try FramesTable.parse(text)
        return nil
    } catch let e as FramesTable.ParseError {
        return e
    } catch {
        Issue.record("unexpected error type \(error)")
        return nil
    }
}

@Suite struct FramesTableTests {
    @Test func headerIsTheContractsColumns() {
        #expect(FramesTable.header == "frame,group,center_us,flags")
    }

    @Test func linesRenderEveryColumn() {
        #expect(FramesTable.line(FrameRow(frame: 0, group: 12, centerMicroseconds: 1_234_567, isDup: false)) == "0,12,1234567,")
        #expect(FramesTable.line(FrameRow(frame: 3, group: 15, centerMicroseconds: -40, isDup: true)) == "3,15,-40,dup")
    }

    @Test func randomTablesRoundTrip() throws {
        var rng = SeededRandom(seed: 21)
        for _ in 0..<200 {
            let firstGroup = rng.int(Int64(-5)...1_000)
            let rows = (0..<rng.int(0...300)).map { i in
                FrameRow(frame: Int64(i), group: firstGroup + Int64(i),
                         centerMicroseconds: rng.int(Int64(-1_000_000)...9_000_000_000_000), isDup: rng.chance(0.2))
            }
            let lines = [FramesTable.header] + rows.map(FramesTable.line)
            #expect(try FramesTable.parse(lines.joined(separator: "\n")) == rows)
            #expect(try FramesTable.parse(lines.joined(separator: "\n") + "\n") == rows)
            #expect(try FramesTable.parse(lines.joined(separator: "\r\n") + "\r\n") == rows)
        }
    }

    @Test func headerOnlyIsAnEmptyTable() throws {
        #expect(try FramesTable.parse("frame,group,center_us,flags\n").isEmpty)
    }

    @Test(arguments: ["", "frame,group,center,flags\n0,0,0,", "0,0,0,\n1,1,1,", "Frame,Group,Center_us,Flags", "frame,group,center_us"])
    func badHeaderIsAnErrorOnLineOne(text: String) throws {
        let e = try #require(parseError(text))
        #expect(e.line == 1)
        #expect(e.description.contains("line 1"))
        #expect(e.description.contains(FramesTable.header))
    }

    @Test(arguments: [
        "0,0,100",           // too few fields
        "0,0,100,,",         // too many fields
        "x,0,100,",          // not a number
        "0,0,1.5,",          // not an integer
        "0,0,100,DUP",       // unknown flag
        "0,0,100,drop",
        "0,,100,",
        " 0,0,100,",
    ])
    func badRowIsAnErrorNamingItsLine(row: String) throws {
        let text = [FramesTable.header, "0,10,1000,", "1,11,2000,dup", "", row, "3,13,4000,"].joined(separator: "\n")
        let e = try #require(parseError(text))
        #expect(e.line == 5, "\(e)")
        #expect(e.description.contains("line 5"))
        #expect(e.description.contains(row), "the sentence should quote the row: \(e)")
    }
}
