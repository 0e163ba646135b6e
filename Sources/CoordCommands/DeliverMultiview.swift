import Coordinator
import Deliverables
import Foundation
import TakeDocuments

/// `coord deliver --to multiview [--layout grid|pip] [--width W]` (CONTRACT §15): the one movie of every angle.
enum Multiview {
    static let word = "multiview"

    /// Whether `--to LIST` asks for the multiview, and the list without it.
    static func split(_ list: String) -> (Bool, String) {
        let words = list.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        let rest = words.filter { $0 != word }
        return (rest.count < words.count, rest.joined(separator: ","))
    }

    /// `--layout` and `--width` say how to make the multiview: without it they are a mistake worth a sentence.
    static func refuseOptions(_ layout: String?, _ width: Int?) throws {
        guard layout != nil || width != nil else { return }
        throw CoordError(.usage, "--\(layout != nil ? "layout" : "width") applies only to --to multiview.")
    }

    /// Makes `deliver/<take-id>_multiview.mov` and prints `made …` or `up to date …`; failures as CoordError.
    static func deliver(_ takeDirectory: String, layout: String?, width: Int?) throws {
        guard let chosen = MultiviewLayout(rawValue: layout ?? MultiviewLayout.grid.rawValue) else {
            throw CoordError(.usage, "--layout must be grid or pip (got \(layout ?? "")).")
        }
        do {
            let (output, made) = try MultiviewDeliverer.run(takeDirectory: takeDirectory, layout: chosen, width: width ?? 1920) { line in
                FileHandle.standardError.write(Data("coord deliver: \(line)\n".utf8))
            }
            print(made ? "made \(output)" : "up to date \(output)")
        } catch let problem as DeliverProblem {
            throw CoordError(.usage, problem.sentence)
        } catch let failure as DeliverFailure {
            throw CoordError(.failure, failure.sentence)
        }
    }
}
