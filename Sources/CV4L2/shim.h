// What Swift cannot import from libv4l2 and <linux/videodev2.h>: the variadic v4l2_open/v4l2_ioctl,
// the _IOWR() request numbers and the v4l2_fourcc() pixel formats. Every wrapper returns -1 with
// errno set on failure (MAP_FAILED for cv4l2_mmap), exactly like the call it wraps; retrying EINTR
// and turning errno into an error is the Swift funnel's job (Sources/V4L2/V4L2Device.swift).
// Only LibV4L2Driver (Sources/V4L2/LibV4L2Driver.swift) calls these; no request number lives elsewhere.
#ifndef CV4L2_SHIM_H
#define CV4L2_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/videodev2.h>
#include <libv4l2.h>

// ---- open / close ----

static inline int cv4l2_open(const char *path, int flags) {
    return v4l2_open(path, flags);
}

static inline int cv4l2_close(int fd) {
    return v4l2_close(fd);
}

/// 1 if `path` names a character device, 0 if it exists but is something else, -1 with errno if stat fails.
static inline int cv4l2_is_char_device(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return S_ISCHR(st.st_mode) ? 1 : 0;
}

// ---- ioctls ----

static inline int cv4l2_ioctl_querycap(int fd, struct v4l2_capability *cap) {
    return v4l2_ioctl(fd, VIDIOC_QUERYCAP, cap);
}

static inline int cv4l2_ioctl_enum_fmt(int fd, struct v4l2_fmtdesc *desc) {
    return v4l2_ioctl(fd, VIDIOC_ENUM_FMT, desc);
}

static inline int cv4l2_ioctl_enum_framesizes(int fd, struct v4l2_frmsizeenum *size) {
    return v4l2_ioctl(fd, VIDIOC_ENUM_FRAMESIZES, size);
}

static inline int cv4l2_ioctl_enum_frameintervals(int fd, struct v4l2_frmivalenum *interval) {
    return v4l2_ioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, interval);
}

static inline int cv4l2_ioctl_g_fmt(int fd, struct v4l2_format *format) {
    return v4l2_ioctl(fd, VIDIOC_G_FMT, format);
}

static inline int cv4l2_ioctl_s_fmt(int fd, struct v4l2_format *format) {
    return v4l2_ioctl(fd, VIDIOC_S_FMT, format);
}

static inline int cv4l2_ioctl_g_parm(int fd, struct v4l2_streamparm *parm) {
    return v4l2_ioctl(fd, VIDIOC_G_PARM, parm);
}

static inline int cv4l2_ioctl_s_parm(int fd, struct v4l2_streamparm *parm) {
    return v4l2_ioctl(fd, VIDIOC_S_PARM, parm);
}

static inline int cv4l2_ioctl_reqbufs(int fd, struct v4l2_requestbuffers *req) {
    return v4l2_ioctl(fd, VIDIOC_REQBUFS, req);
}

static inline int cv4l2_ioctl_querybuf(int fd, struct v4l2_buffer *buf) {
    return v4l2_ioctl(fd, VIDIOC_QUERYBUF, buf);
}

static inline int cv4l2_ioctl_qbuf(int fd, struct v4l2_buffer *buf) {
    return v4l2_ioctl(fd, VIDIOC_QBUF, buf);
}

static inline int cv4l2_ioctl_dqbuf(int fd, struct v4l2_buffer *buf) {
    return v4l2_ioctl(fd, VIDIOC_DQBUF, buf);
}

// STREAMON/OFF take a pointer to the buffer type, as the kernel does, so a scripted driver sees the same argument.
static inline int cv4l2_ioctl_streamon(int fd, int *buf_type) {
    return v4l2_ioctl(fd, VIDIOC_STREAMON, buf_type);
}

static inline int cv4l2_ioctl_streamoff(int fd, int *buf_type) {
    return v4l2_ioctl(fd, VIDIOC_STREAMOFF, buf_type);
}

static inline int cv4l2_ioctl_queryctrl(int fd, struct v4l2_queryctrl *query) {
    return v4l2_ioctl(fd, VIDIOC_QUERYCTRL, query);
}

static inline int cv4l2_ioctl_g_ctrl(int fd, struct v4l2_control *control) {
    return v4l2_ioctl(fd, VIDIOC_G_CTRL, control);
}

static inline int cv4l2_ioctl_s_ctrl(int fd, struct v4l2_control *control) {
    return v4l2_ioctl(fd, VIDIOC_S_CTRL, control);
}

// ---- buffers ----

/// Maps a driver buffer read/write shared; returns MAP_FAILED (see cv4l2_map_failed) with errno on failure.
static inline void *cv4l2_mmap(int fd, size_t length, int64_t offset) {
    return v4l2_mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
}

static inline int cv4l2_munmap(void *start, size_t length) {
    return v4l2_munmap(start, length);
}

/// 1 if a pointer returned by cv4l2_mmap is MAP_FAILED (a macro Swift cannot import).
static inline int cv4l2_map_failed(const void *p) {
    return p == MAP_FAILED ? 1 : 0;
}

// ---- waiting ----

/// Waits up to `timeout_ms` for a filled buffer: 1 readable, 0 timeout, -1 with errno. A node whose device is
/// gone reports POLLHUP (v4l2_poll once the video_device is unregistered), returned as -1 with ENODEV; POLLERR
/// alone (not streaming, a queue error) counts as readable so that VIDIOC_DQBUF reports the driver's errno.
static inline int cv4l2_poll(int fd, int timeout_ms) {
    struct pollfd pfd = { .fd = fd, .events = POLLIN, .revents = 0 };
    int ready = poll(&pfd, 1, timeout_ms);
    if (ready <= 0) return ready;
    if (pfd.revents & POLLNVAL) { errno = EBADF; return -1; }
    if ((pfd.revents & POLLHUP) && !(pfd.revents & POLLIN)) { errno = ENODEV; return -1; }
    return 1;
}

// ---- constants (function-like macros and enum values, as plain values Swift can import) ----

static const uint32_t CV4L2_CAP_VIDEO_CAPTURE = V4L2_CAP_VIDEO_CAPTURE;
static const uint32_t CV4L2_CAP_VIDEO_CAPTURE_MPLANE = V4L2_CAP_VIDEO_CAPTURE_MPLANE;
static const uint32_t CV4L2_CAP_READWRITE = V4L2_CAP_READWRITE;
static const uint32_t CV4L2_CAP_STREAMING = V4L2_CAP_STREAMING;
static const uint32_t CV4L2_CAP_DEVICE_CAPS = V4L2_CAP_DEVICE_CAPS;
static const uint32_t CV4L2_CAP_META_CAPTURE = V4L2_CAP_META_CAPTURE;
static const uint32_t CV4L2_CAP_EXT_PIX_FORMAT = V4L2_CAP_EXT_PIX_FORMAT;

static const uint32_t CV4L2_PIX_FMT_YUYV = V4L2_PIX_FMT_YUYV;
static const uint32_t CV4L2_PIX_FMT_MJPEG = V4L2_PIX_FMT_MJPEG;
static const uint32_t CV4L2_PIX_FMT_NV12 = V4L2_PIX_FMT_NV12;
static const uint32_t CV4L2_PIX_FMT_YUV420 = V4L2_PIX_FMT_YUV420;

static const uint32_t CV4L2_FMT_FLAG_COMPRESSED = V4L2_FMT_FLAG_COMPRESSED;
static const uint32_t CV4L2_FMT_FLAG_EMULATED = V4L2_FMT_FLAG_EMULATED;

static const uint32_t CV4L2_FRMSIZE_TYPE_DISCRETE = V4L2_FRMSIZE_TYPE_DISCRETE;
static const uint32_t CV4L2_FRMSIZE_TYPE_CONTINUOUS = V4L2_FRMSIZE_TYPE_CONTINUOUS;
static const uint32_t CV4L2_FRMSIZE_TYPE_STEPWISE = V4L2_FRMSIZE_TYPE_STEPWISE;
static const uint32_t CV4L2_FRMIVAL_TYPE_DISCRETE = V4L2_FRMIVAL_TYPE_DISCRETE;
static const uint32_t CV4L2_FRMIVAL_TYPE_CONTINUOUS = V4L2_FRMIVAL_TYPE_CONTINUOUS;
static const uint32_t CV4L2_FRMIVAL_TYPE_STEPWISE = V4L2_FRMIVAL_TYPE_STEPWISE;

static const uint32_t CV4L2_BUF_TYPE_VIDEO_CAPTURE = V4L2_BUF_TYPE_VIDEO_CAPTURE;
static const uint32_t CV4L2_MEMORY_MMAP = V4L2_MEMORY_MMAP;
static const uint32_t CV4L2_FIELD_ANY = V4L2_FIELD_ANY;
static const uint32_t CV4L2_FIELD_NONE = V4L2_FIELD_NONE;
static const uint32_t CV4L2_COLORSPACE_SRGB = V4L2_COLORSPACE_SRGB;
static const uint32_t CV4L2_CAP_TIMEPERFRAME = V4L2_CAP_TIMEPERFRAME;

static const uint32_t CV4L2_BUF_FLAG_MAPPED = V4L2_BUF_FLAG_MAPPED;
static const uint32_t CV4L2_BUF_FLAG_QUEUED = V4L2_BUF_FLAG_QUEUED;
static const uint32_t CV4L2_BUF_FLAG_DONE = V4L2_BUF_FLAG_DONE;
static const uint32_t CV4L2_BUF_FLAG_ERROR = V4L2_BUF_FLAG_ERROR;
static const uint32_t CV4L2_BUF_FLAG_TIMESTAMP_MASK = V4L2_BUF_FLAG_TIMESTAMP_MASK;
static const uint32_t CV4L2_BUF_FLAG_TIMESTAMP_UNKNOWN = V4L2_BUF_FLAG_TIMESTAMP_UNKNOWN;
static const uint32_t CV4L2_BUF_FLAG_TIMESTAMP_MONOTONIC = V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC;
static const uint32_t CV4L2_BUF_FLAG_TIMESTAMP_COPY = V4L2_BUF_FLAG_TIMESTAMP_COPY;
static const uint32_t CV4L2_BUF_FLAG_TSTAMP_SRC_MASK = V4L2_BUF_FLAG_TSTAMP_SRC_MASK;
static const uint32_t CV4L2_BUF_FLAG_TSTAMP_SRC_EOF = V4L2_BUF_FLAG_TSTAMP_SRC_EOF;
static const uint32_t CV4L2_BUF_FLAG_TSTAMP_SRC_SOE = V4L2_BUF_FLAG_TSTAMP_SRC_SOE;

// Controls: the IDs coord locks across a rig, their types and flags.
static const uint32_t CV4L2_CID_EXPOSURE_AUTO = V4L2_CID_EXPOSURE_AUTO;
static const uint32_t CV4L2_CID_EXPOSURE_ABSOLUTE = V4L2_CID_EXPOSURE_ABSOLUTE;
static const uint32_t CV4L2_CID_GAIN = V4L2_CID_GAIN;
static const uint32_t CV4L2_CID_AUTO_WHITE_BALANCE = V4L2_CID_AUTO_WHITE_BALANCE;
static const uint32_t CV4L2_CID_WHITE_BALANCE_TEMPERATURE = V4L2_CID_WHITE_BALANCE_TEMPERATURE;
static const uint32_t CV4L2_CID_FOCUS_AUTO = V4L2_CID_FOCUS_AUTO;
static const uint32_t CV4L2_CID_FOCUS_ABSOLUTE = V4L2_CID_FOCUS_ABSOLUTE;
static const int32_t CV4L2_EXPOSURE_AUTO = V4L2_EXPOSURE_AUTO;
static const int32_t CV4L2_EXPOSURE_MANUAL = V4L2_EXPOSURE_MANUAL;
static const int32_t CV4L2_EXPOSURE_SHUTTER_PRIORITY = V4L2_EXPOSURE_SHUTTER_PRIORITY;
static const int32_t CV4L2_EXPOSURE_APERTURE_PRIORITY = V4L2_EXPOSURE_APERTURE_PRIORITY;

static const uint32_t CV4L2_CTRL_TYPE_INTEGER = V4L2_CTRL_TYPE_INTEGER;
static const uint32_t CV4L2_CTRL_TYPE_BOOLEAN = V4L2_CTRL_TYPE_BOOLEAN;
static const uint32_t CV4L2_CTRL_TYPE_MENU = V4L2_CTRL_TYPE_MENU;
static const uint32_t CV4L2_CTRL_FLAG_DISABLED = V4L2_CTRL_FLAG_DISABLED;
static const uint32_t CV4L2_CTRL_FLAG_INACTIVE = V4L2_CTRL_FLAG_INACTIVE;
static const uint32_t CV4L2_CTRL_FLAG_NEXT_CTRL = V4L2_CTRL_FLAG_NEXT_CTRL;

#endif
