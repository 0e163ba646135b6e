// The sentence a V4L2 camera gives when it cannot start streaming, naming the USB bus of a bandwidth refusal.
import Foundation
import V4L2

#if canImport(Glibc)
import Glibc
#endif

extension V4L2Camera {
    /// Why STREAMON failed, in one sentence; a bandwidth refusal (uvcvideo's ENOSPC: the bus's isochronous
    /// bandwidth is taken by the cameras already streaming on it) names the bus, the thing the operator must change.
    static func startProblem(_ error: Error, busInfo: String) -> String {
        guard let error = error as? V4L2Error, error.operation == "VIDIOC_STREAMON", error.errno == ENOSPC,
              !busInfo.isEmpty else { return sentence(error) }
        // bus_info "usb-<controller>-<port path>": the controller is the bus every camera behind it shares.
        var controller = busInfo.hasPrefix("usb-") ? String(busInfo.dropFirst(4)) : busInfo
        if let dash = controller.lastIndex(of: "-") { controller = String(controller[..<dash]) }
        var named = error
        named.detail = "not enough USB bandwidth left for this format and frame rate on the bus of controller "
            + "\(controller) (\(busInfo)), which the cameras already streaming on it hold (No space left on device)"
        return sentence(named)
    }
}
