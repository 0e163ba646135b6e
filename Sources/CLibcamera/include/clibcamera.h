// The one funnel to libcamera (C++): a C API Swift imports. Written against the part of libcamera's API that is the
// same from Debian 12's 0.0.3 to current releases (see docs/node-guide.md); every name is prefixed clc_.
#ifndef CLIBCAMERA_H
#define CLIBCAMERA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clc_manager clc_manager;
typedef struct clc_camera clc_camera;

/// One camera as libcamera lists it.
typedef struct {
    char id[256];
    char model[128];
    /// FrameDurationLimits as the camera lists it (µs); both 0 when it lists none.
    int64_t frame_duration_min_us;
    int64_t frame_duration_max_us;
    int has_exposure_time, has_analogue_gain, has_colour_gains, has_colour_temperature, has_lens_position;
    /// The video stream's formats and sizes: "YUV420 640x480,1280x720; MJPEG 640x480" (cut to fit).
    char formats[1024];
} clc_camera_info;

/// Starts libcamera's camera manager; NULL with `why` filled when it cannot start.
clc_manager *clc_manager_start(char *why, size_t why_len);
void clc_manager_stop(clc_manager *manager);
int clc_camera_count(clc_manager *manager);
/// 0, or -1 when `index` is out of range.
int clc_camera_info_at(clc_manager *manager, int index, clc_camera_info *out);

/// One completed frame. Its planes stay valid (the request is not queued again) until `clc_camera_requeue(request)`.
typedef struct {
    const uint8_t *planes[3];
    uint32_t strides[3];
    uint32_t plane_count;
    uint32_t width, height;
    /// The DRM fourcc of the stream's pixel format.
    uint32_t fourcc;
    uint32_t sequence;
    /// From the request's metadata; -1 when the pipeline did not report it.
    int64_t sensor_timestamp_ns;
    int32_t exposure_us;
    int64_t frame_duration_us;
    /// The FrameDurationLimits minimum the request carried, -1 when it carried none.
    int64_t requested_duration_us;
    /// The request that carried it: handed back with clc_camera_requeue once the planes are read.
    uint32_t request;
} clc_frame;

typedef void (*clc_frame_callback)(void *context, const clc_frame *frame);

/// Acquires and configures camera `id` for one video stream (YUV420 where offered, else YUYV) near width×height; NULL with
/// `why` filled (naming the camera and, when it is not found, the cameras libcamera lists).
clc_camera *clc_camera_open(clc_manager *manager, const char *id, uint32_t width, uint32_t height, char *why,
                            size_t why_len);
/// The stream's configured size and fourcc.
void clc_camera_stream(clc_camera *camera, uint32_t *width, uint32_t *height, uint32_t *fourcc);
/// Starts streaming with the controls set so far; frames arrive on libcamera's thread, each request held until
/// the caller hands it back with clc_camera_requeue. 0, or -1 with `why`.
int clc_camera_start(clc_camera *camera, clc_frame_callback callback, void *context, char *why, size_t why_len);
/// Queues request `request` (a clc_frame's) again with the controls set so far; from any thread. 0, or -1 when the
/// camera is stopped or libcamera refused it.
int clc_camera_requeue(clc_camera *camera, uint32_t request);
/// Requests libcamera completed since the camera was opened (cancelled ones not counted).
uint64_t clc_camera_completed(clc_camera *camera);
/// The frame duration the next request queued carries (FrameDurationLimits = {us, us}).
void clc_camera_request_duration(clc_camera *camera, int64_t us);
/// Controls every later request carries until changed; a negative value leaves that control alone.
/// Locking auto exposure and white balance for a take: `ae_enable`/`awb_enable` 0.
void clc_camera_set_controls(clc_camera *camera, int32_t exposure_us, float analogue_gain, float red_gain,
                             float blue_gain, int32_t colour_temperature_k, float lens_position, int ae_enable,
                             int awb_enable);
void clc_camera_stop(clc_camera *camera);
void clc_camera_close(clc_camera *camera);

#ifdef __cplusplus
}
#endif

#endif
