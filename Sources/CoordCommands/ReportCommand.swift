import ArgumentParser
import CoordCore
import ConsoleServer
import Coordinator
import TakeDocuments
import Foundation
import Synchronization
import Logging
import Platform
import TakeReport
import UnixSignals
#if canImport(Glibc)
import Glibc
#endif


struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a take's sync report.")

    @Argument(help: "The take directory.") var takeDirectory: String
    @Flag(help: "Print sync-report.json.") var json = false
    @Option(help: "Write the HTML report to this file.") var html: String?

    func run() throws {
        let dir = URL(fileURLWithPath: takeDirectory)
        // Every file of the take through the funnel: a link, FIFO or device is refused, never read (CONTRACT §14).
        let take: TakeDirectory
        do { take = try TakeDirectory.open(takeDirectory) } catch {
            let absent = error.reason == .missing || error.reason == .notDirectory
            throw CoordError(.usage, absent ? "\(takeDirectory) has no manifest.json; it is not a coord take directory." : error.sentence)
        }
        func present(_ file: String) throws -> Bool {
            do { return try take.checkFile(file) } catch { throw CoordError(.usage, error.sentence) }
        }
        func read(_ file: String) throws -> Data {
            do { return try take.data(file, limit: 256 << 20) } catch { throw CoordError(error.isRefusal ? .usage : .failure, error.sentence) }
        }
        if try present("manifest.json"), try !present("sync-report.json"),
           let manifest = try? JSONDecoder().decode(TakeManifest.self, from: read("manifest.json")),
           manifest.collection?.state == .pending {
            // Recorded, never collected: the report is made from the collected frames.
            throw CoordError(.failure, "take \(manifest.takeID) has not been collected yet, so it has no report; run coord collect --rig RIG.yaml \(takeDirectory).")
        }
        for file in ["manifest.json", "sync-report.json"] {
            guard try present(file) else { throw CoordError(.usage, "\(takeDirectory) has no \(file); it is not a coord take directory.") }
        }
        do {
            let manifestData = try read("manifest.json")
            let reportData = try read("sync-report.json")
            // A file that does not decode is named with the field that is wrong (JSONDecoder names none for a number).
            func decoded<T: Decodable>(_ type: T.Type, _ data: Data, _ file: String) throws -> T {
                do { return try JSONDecoder().decode(type, from: data) } catch {
                    throw CoordError(.usage, "\(takeDirectory)/\(file) is not readable: \(JSONFieldProblem.describe(error, decoding: type, from: data)).")
                }
            }
            let manifest = try decoded(TakeManifest.self, manifestData, "manifest.json")
            let report = try decoded(SyncReport.self, reportData, "sync-report.json")
            // The files the report speaks of: any of them a link, FIFO or device refuses the take.
            for camera in manifest.cameras {
                _ = try present("\(camera.node)/\(camera.camera).frames.csv")
                for file in camera.files { _ = try present(file.path) }
            }
            for sound in manifest.audio ?? [] { _ = try present(sound.path) }
            if json {
                FileHandle.standardOutput.write(reportData)
                print()
            } else {
                print(TakeSummary.text(directory: dir.path, manifest: manifest, report: report))
            }
            if let html {
                // Rendered afresh from the take's files, so an older take gets the current page.
                let page = SyncReportPage.html(takeDirectory: dir, manifest: manifest, report: report)
                do {
                    try Data(page.utf8).write(to: URL(fileURLWithPath: html), options: .atomic)
                } catch {
                    throw CoordError(.failure, "cannot write the HTML report to \(html): \(reason(error)).")
                }
            }
        } catch let error as CoordError {
            throw error
        } catch let error as DecodingError {
            throw CoordError(.usage, "\(takeDirectory) does not hold a readable coord take: \(DecodingProblem.sentence(error)).")
        } catch {
            throw CoordError(.usage, "cannot read the take in \(takeDirectory): \(reason(error)).")
        }
    }
}
