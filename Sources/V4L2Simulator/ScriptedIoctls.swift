// The scripted driver's answers to every ioctl, as uvcvideo answers them.
import CV4L2
import CoordCore
import Foundation
import Platform
import V4L2

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension ScriptedV4L2Driver {
    // ---- ioctls ----

    func answer(_ request: V4L2Request, fd: Int32, handle: Handle, device: DeviceState,
                        argument: UnsafeMutableRawPointer) -> Int32
    {
        let profile = device.profile
        switch request {
        case .querycap:
            let cap = argument.assumingMemoryBound(to: v4l2_capability.self)
            cap.pointee = v4l2_capability()
            Self.write(profile.driver, into: &cap.pointee.driver)
            Self.write(profile.card, into: &cap.pointee.card)
            Self.write(profile.busInfo, into: &cap.pointee.bus_info)
            cap.pointee.version = Profile.kernelVersion
            cap.pointee.capabilities = profile.capabilities
            cap.pointee.device_caps = profile.deviceCaps
            return 0

        case .enumFmt:
            let desc = argument.assumingMemoryBound(to: v4l2_fmtdesc.self)
            guard desc.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE, Int(desc.pointee.index) < profile.formats.count
            else { return EINVAL }
            let format = profile.formats[Int(desc.pointee.index)]
            desc.pointee.flags = format.compressed ? CV4L2_FMT_FLAG_COMPRESSED : 0
            desc.pointee.pixelformat = format.pixelFormat
            Self.write(format.description, into: &desc.pointee.description)
            return 0

        case .enumFramesizes:
            let size = argument.assumingMemoryBound(to: v4l2_frmsizeenum.self)
            guard let format = profile.format(size.pointee.pixel_format),
                  Int(size.pointee.index) < format.sizes.count
            else { return EINVAL }
            let s = format.sizes[Int(size.pointee.index)]
            size.pointee.type = CV4L2_FRMSIZE_TYPE_DISCRETE
            size.pointee.discrete.width = s.width
            size.pointee.discrete.height = s.height
            return 0

        case .enumFrameintervals:
            let ival = argument.assumingMemoryBound(to: v4l2_frmivalenum.self)
            guard let format = profile.format(ival.pointee.pixel_format),
                  let s = format.sizes.first(where: { $0.width == ival.pointee.width && $0.height == ival.pointee.height }),
                  Int(ival.pointee.index) < s.fps.count
            else { return EINVAL }
            ival.pointee.type = CV4L2_FRMIVAL_TYPE_DISCRETE
            ival.pointee.discrete.numerator = 1
            ival.pointee.discrete.denominator = s.fps[Int(ival.pointee.index)]
            return 0

        case .gFmt, .sFmt:
            let format = argument.assumingMemoryBound(to: v4l2_format.self)
            guard profile.isCapture, format.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE else { return EINVAL }
            if request == .sFmt {
                if let name = device.script.sFmtError { return Self.errnoNamed(name)! }
                // vb2_is_busy: the format cannot change under allocated buffers.
                if !device.buffers.isEmpty { return EBUSY }
                device.setFormat(pixelFormat: format.pointee.fmt.pix.pixelformat,
                                 width: format.pointee.fmt.pix.width, height: format.pointee.fmt.pix.height)
            }
            format.pointee.fmt.pix = device.pixFormat()
            return 0

        case .gParm, .sParm:
            let parm = argument.assumingMemoryBound(to: v4l2_streamparm.self)
            guard profile.isCapture else { return ENOTTY }
            guard parm.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE else { return EINVAL }
            if request == .sParm {
                if device.streaming, device.script.sParmWhileStreaming != "resync" { return EBUSY }
                let t = parm.pointee.parm.capture.timeperframe
                device.setInterval(numerator: t.numerator, denominator: t.denominator)
            }
            parm.pointee.parm.capture = v4l2_captureparm()
            parm.pointee.parm.capture.capability = CV4L2_CAP_TIMEPERFRAME
            parm.pointee.parm.capture.timeperframe.numerator = 1
            parm.pointee.parm.capture.timeperframe.denominator = device.fps
            return 0

        case .reqbufs:
            let req = argument.assumingMemoryBound(to: v4l2_requestbuffers.self)
            guard profile.isCapture, req.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE,
                  req.pointee.memory == CV4L2_MEMORY_MMAP
            else { return EINVAL }
            if let owner = device.owner, owner != fd { return EBUSY }
            if device.streaming { return EBUSY }
            device.releaseBuffers()
            if req.pointee.count == 0 {
                device.owner = nil
                return 0
            }
            device.allocateBuffers(count: min(req.pointee.count, 32))  // VIDEO_MAX_FRAME
            device.owner = fd
            req.pointee.count = UInt32(device.buffers.count)
            return 0

        case .querybuf, .qbuf, .dqbuf:
            let buf = argument.assumingMemoryBound(to: v4l2_buffer.self)
            guard profile.isCapture, buf.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE,
                  buf.pointee.memory == CV4L2_MEMORY_MMAP
            else { return EINVAL }
            if let owner = device.owner, owner != fd, request != .querybuf { return EBUSY }
            switch request {
            case .querybuf:
                guard Int(buf.pointee.index) < device.buffers.count else { return EINVAL }
            case .qbuf:
                let index = Int(buf.pointee.index)
                guard index < device.buffers.count, device.buffers[index].state == .dequeued else { return EINVAL }
                device.buffers[index].state = .queued
                device.buffers[index].queuedAtUs = Self.nowUs()
                device.queued.append(index)
                condition.broadcast()
            default:
                guard device.streaming else { return EINVAL }
                while device.done.isEmpty {
                    if handle.nonBlocking { return EAGAIN }
                    // A blocking fd sleeps in DQBUF until a frame is done, the stream stops or the device goes.
                    let now = Self.nowUs()
                    wait(until: device.pending?.readyAt ?? .infinity, now: now)
                    guard handles[fd] != nil else { return EBADF }
                    device.advance(now: Self.nowUs(), painter: painter)
                    if device.unplugged { return ENODEV }
                    guard device.streaming else { return EINVAL }
                }
                let index = device.done.removeFirst()
                device.buffers[index].state = .dequeued
                device.dequeued += 1
                buf.pointee.index = UInt32(index)
            }
            device.describe(buffer: Int(buf.pointee.index), into: buf)
            return 0

        case .streamon, .streamoff:
            let type = argument.assumingMemoryBound(to: Int32.self).pointee
            guard profile.isCapture, type == Int32(bitPattern: CV4L2_BUF_TYPE_VIDEO_CAPTURE) else { return EINVAL }
            if let owner = device.owner, owner != fd { return EBUSY }
            if request == .streamoff {
                device.stop()
                condition.broadcast()
                return 0
            }
            guard device.owner != nil else { return EINVAL }  // no buffers requested
            if let name = device.script.streamonError { return Self.errnoNamed(name)! }
            if !device.streaming { device.start(now: Self.nowUs()) }
            condition.broadcast()
            return 0

        case .queryctrl:
            let query = argument.assumingMemoryBound(to: v4l2_queryctrl.self)
            guard profile.isCapture else { return ENOTTY }  // the metadata node has no control handler
            let id = query.pointee.id
            let control: ControlSpec?
            if (id & CV4L2_CTRL_FLAG_NEXT_CTRL) != 0 {
                let after = id & 0x0fff_ffff
                control = profile.controls.filter { $0.id > after }.min { $0.id < $1.id }
            } else {
                control = profile.control(id)
            }
            guard let control else { return EINVAL }
            query.pointee = v4l2_queryctrl()
            query.pointee.id = control.id
            query.pointee.type = control.type
            Self.write(control.name, into: &query.pointee.name)
            query.pointee.minimum = control.minimum
            query.pointee.maximum = control.maximum
            query.pointee.step = control.step
            query.pointee.default_value = control.defaultValue
            query.pointee.flags = device.isActive(control) ? 0 : CV4L2_CTRL_FLAG_INACTIVE
            return 0

        case .gCtrl, .sCtrl:
            let value = argument.assumingMemoryBound(to: v4l2_control.self)
            guard profile.isCapture else { return ENOTTY }
            guard let control = profile.control(value.pointee.id) else { return EINVAL }
            if request == .sCtrl {
                // UVC's "wrong state": the camera refuses a manual value while its auto mode runs.
                guard device.isActive(control) else { return EACCES }
                switch control.validate(value.pointee.value) {
                case .success(let kept):
                    device.controls[control.id] = kept
                case .failure(let err):
                    return err.code
                }
            }
            value.pointee.value = device.controls[control.id] ?? control.defaultValue
            return 0
        }
    }
}
