import ArgumentParser
import CoordCore
import ConsoleServer
import Coordinator
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
        let manifestURL = dir.appendingPathComponent("manifest.json")
        if FileManager.default.fileExists(atPath: manifestURL.path),
           !FileManager.default.fileExists(atPath: dir.appendingPathComponent("sync-report.json").path),
           let data = try? Data(contentsOf: manifestURL), let manifest = try? JSONDecoder().decode(TakeManifest.self, from: data),
           manifest.collection?.state == .pending {
            // Recorded, never collected: the report is made from the collected frames.
            throw CoordError(.failure, "take \(manifest.takeID) has not been collected yet, so it has no report; run coord collect --rig RIG.yaml \(takeDirectory).")
        }
        for file in ["manifest.json", "sync-report.json"]
        where !FileManager.default.fileExists(atPath: dir.appendingPathComponent(file).path) {
            throw CoordError(.usage, "\(takeDirectory) has no \(file); it is not a coord take directory.")
        }
        do {
            let manifestData = try Data(contentsOf: dir.appendingPathComponent("manifest.json"))
            let reportData = try Data(contentsOf: dir.appendingPathComponent("sync-report.json"))
            let manifest = try JSONDecoder().decode(TakeManifest.self, from: manifestData)
            let report = try JSONDecoder().decode(SyncReport.self, from: reportData)
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
