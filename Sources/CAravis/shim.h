// What Swift cannot use directly from Aravis 0.8 (GenICam: GigE Vision and USB3 Vision): GError** out-parameters,
// g_object_unref on typed pointers, the ARV_TYPE_* macros. Every wrapper that can fail copies GError's message into
// `err` (`errlen` bytes, NUL-terminated) and returns 0/NULL/-1, so the Swift side never owns a GError.
// Only GenICamCamera (Sources/GenICam/GenICamCamera.swift) calls these; no Aravis call lives elsewhere.
#ifndef CARAVIS_SHIM_H
#define CARAVIS_SHIM_H

#include <arv.h>
#include <string.h>
#include <stdint.h>

static inline int carv_take_error(GError *error, char *err, size_t errlen) {
    if (error == NULL) return 0;
    if (err != NULL && errlen > 0) {
        strncpy(err, error->message ? error->message : "unknown Aravis error", errlen - 1);
        err[errlen - 1] = 0;
    }
    g_error_free(error);
    return 1;
}

// ---- devices ----

/// Aravis' own GigE Vision discovery broadcasts on every interface of the host, so coord never lets it run: GigE
/// Vision cameras are found by GenICamDiscovery on the interfaces the node names and opened by address
/// (`carv_gv_camera_open`). Called before every Aravis device call; idempotent.
static inline void carv_keep_gige_discovery_off(void) {
    arv_disable_interface("GigEVision");
}

/// Rescans USB3 Vision (GigE Vision stays off) and returns how many devices answered.
static inline unsigned carv_update_device_list(void) {
    carv_keep_gige_discovery_off();
    arv_update_device_list();
    return arv_get_n_devices();
}
static inline const char *carv_device_id(unsigned i) { return arv_get_device_id(i); }
static inline const char *carv_device_vendor(unsigned i) { return arv_get_device_vendor(i); }
static inline const char *carv_device_model(unsigned i) { return arv_get_device_model(i); }
static inline const char *carv_device_serial(unsigned i) { return arv_get_device_serial_nbr(i); }
static inline const char *carv_device_address(unsigned i) { return arv_get_device_address(i); }
/// "GigEVision" or "USB3Vision" (Aravis' protocol names), or "Fake".
static inline const char *carv_device_protocol(unsigned i) { return arv_get_device_protocol(i); }

// ---- the camera ----

/// A USB3 Vision camera by its device id (GigE Vision discovery stays off).
static inline ArvCamera *carv_camera_open(const char *id, char *err, size_t errlen) {
    GError *error = NULL;
    carv_keep_gige_discovery_off();
    ArvCamera *camera = arv_camera_new(id, &error);
    if (carv_take_error(error, err, errlen)) {
        if (camera) g_object_unref(camera);
        return NULL;
    }
    return camera;
}
/// A GigE Vision camera at IPv4 `device_ip`, talked to from the host's `interface_ip` only (unicast GVCP, no
/// discovery); NULL with `err` when it does not answer.
static inline ArvCamera *carv_gv_camera_open(const char *interface_ip, const char *device_ip, char *err, size_t errlen) {
    GError *error = NULL;
    GInetAddress *interface_address = g_inet_address_new_from_string(interface_ip);
    GInetAddress *device_address = g_inet_address_new_from_string(device_ip);
    if (interface_address == NULL || device_address == NULL) {
        if (interface_address) g_object_unref(interface_address);
        if (device_address) g_object_unref(device_address);
        if (err && errlen) { strncpy(err, "not an IPv4 address", errlen - 1); err[errlen - 1] = 0; }
        return NULL;
    }
    ArvDevice *device = arv_gv_device_new(interface_address, device_address, &error);
    g_object_unref(interface_address);
    g_object_unref(device_address);
    if (carv_take_error(error, err, errlen)) { if (device) g_object_unref(device); return NULL; }
    if (device == NULL) { if (err && errlen) { strncpy(err, "it did not answer", errlen - 1); err[errlen - 1] = 0; } return NULL; }
    // The camera holds its own reference to the device (transfer none).
    ArvCamera *camera = arv_camera_new_with_device(device, &error);
    g_object_unref(device);
    if (carv_take_error(error, err, errlen)) { if (camera) g_object_unref(camera); return NULL; }
    return camera;
}
static inline void carv_camera_close(ArvCamera *camera) { if (camera) g_object_unref(camera); }
static inline int carv_camera_is_gv(ArvCamera *camera) { return arv_camera_is_gv_device(camera) ? 1 : 0; }
static inline int carv_camera_is_uv(ArvCamera *camera) { return arv_camera_is_uv_device(camera) ? 1 : 0; }

/// Streams without the packet socket: on loopback (the fake camera) the packet socket receives nothing.
static inline void carv_camera_gv_disable_packet_socket(ArvCamera *camera) {
    if (arv_camera_is_gv_device(camera))
        arv_camera_gv_set_stream_options(camera, ARV_GV_STREAM_OPTION_PACKET_SOCKET_DISABLED);
}

/// The host's address on the link the GigE Vision camera is reached through (the NIC its stream crosses), into
/// `out`; -1 for a camera that is not GigE Vision. (The address object is the device's: transfer none.)
static inline int carv_camera_gv_interface_address(ArvCamera *camera, char *out, size_t outlen) {
    if (!arv_camera_is_gv_device(camera) || outlen == 0) return -1;
    ArvDevice *device = arv_camera_get_device(camera);
    GSocketAddress *socket = arv_gv_device_get_interface_address(ARV_GV_DEVICE(device));
    if (socket == NULL || !G_IS_INET_SOCKET_ADDRESS(socket)) return -1;
    char *text = g_inet_address_to_string(g_inet_socket_address_get_address(G_INET_SOCKET_ADDRESS(socket)));
    if (text == NULL) return -1;
    strncpy(out, text, outlen - 1);
    out[outlen - 1] = 0;
    g_free(text);
    return 0;
}

/// A GigE Vision camera's timestamp tick frequency (Hz; Aravis turns ticks into ns with it), 0 when unknown.
static inline uint64_t carv_camera_gv_tick_frequency(ArvCamera *camera) {
    if (!arv_camera_is_gv_device(camera)) return 0;
    GError *error = NULL;
    guint64 hz = arv_gv_device_get_timestamp_tick_frequency(ARV_GV_DEVICE(arv_camera_get_device(camera)), &error);
    if (error) { g_error_free(error); return 0; }
    return hz;
}

static inline int carv_feature_available(ArvCamera *camera, const char *feature) {
    GError *error = NULL;
    gboolean available = arv_camera_is_feature_available(camera, feature, &error);
    if (error) { g_error_free(error); return 0; }
    return available ? 1 : 0;
}

static inline int carv_get_integer(ArvCamera *camera, const char *feature, int64_t *value, char *err, size_t errlen) {
    GError *error = NULL;
    *value = arv_camera_get_integer(camera, feature, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
static inline int carv_set_integer(ArvCamera *camera, const char *feature, int64_t value, char *err, size_t errlen) {
    GError *error = NULL;
    arv_camera_set_integer(camera, feature, value, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
static inline int carv_integer_bounds(ArvCamera *camera, const char *feature, int64_t *min, int64_t *max, char *err, size_t errlen) {
    GError *error = NULL;
    gint64 lo = 0, hi = 0;
    arv_camera_get_integer_bounds(camera, feature, &lo, &hi, &error);
    *min = lo; *max = hi;
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
/// An integer feature's increment (Width's step, say): 1 when the camera gives none.
static inline int64_t carv_integer_increment(ArvCamera *camera, const char *feature) {
    GError *error = NULL;
    gint64 step = arv_camera_get_integer_increment(camera, feature, &error);
    if (error) { g_error_free(error); return 1; }
    return step > 0 ? step : 1;
}
static inline int carv_get_float(ArvCamera *camera, const char *feature, double *value, char *err, size_t errlen) {
    GError *error = NULL;
    *value = arv_camera_get_float(camera, feature, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
static inline int carv_set_float(ArvCamera *camera, const char *feature, double value, char *err, size_t errlen) {
    GError *error = NULL;
    arv_camera_set_float(camera, feature, value, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
static inline int carv_float_bounds(ArvCamera *camera, const char *feature, double *min, double *max, char *err, size_t errlen) {
    GError *error = NULL;
    arv_camera_get_float_bounds(camera, feature, min, max, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
static inline int carv_set_boolean(ArvCamera *camera, const char *feature, int value, char *err, size_t errlen) {
    GError *error = NULL;
    arv_camera_set_boolean(camera, feature, value ? TRUE : FALSE, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
static inline int carv_set_string(ArvCamera *camera, const char *feature, const char *value, char *err, size_t errlen) {
    GError *error = NULL;
    arv_camera_set_string(camera, feature, value, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
/// Copies the string feature into `out` (`outlen` bytes); -1 with `err` on failure.
static inline int carv_get_string(ArvCamera *camera, const char *feature, char *out, size_t outlen, char *err, size_t errlen) {
    GError *error = NULL;
    const char *value = arv_camera_get_string(camera, feature, &error);
    if (carv_take_error(error, err, errlen)) return -1;
    if (outlen > 0) { strncpy(out, value ? value : "", outlen - 1); out[outlen - 1] = 0; }
    return 0;
}
static inline int carv_execute(ArvCamera *camera, const char *feature, char *err, size_t errlen) {
    GError *error = NULL;
    arv_camera_execute_command(camera, feature, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}

/// The pixel formats the camera offers, as GenICam names them, joined by '\n' into `out`; their count, or -1.
static inline int carv_pixel_formats(ArvCamera *camera, char *out, size_t outlen, char *err, size_t errlen) {
    GError *error = NULL;
    guint n = 0;
    const char **names = arv_camera_dup_available_pixel_formats_as_strings(camera, &n, &error);
    if (carv_take_error(error, err, errlen)) { g_free(names); return -1; }
    size_t used = 0;
    if (outlen > 0) out[0] = 0;
    for (guint i = 0; i < n && names; i++) {
        size_t len = strlen(names[i]);
        if (used + len + 2 > outlen) break;
        memcpy(out + used, names[i], len);
        used += len;
        out[used++] = '\n';
        out[used] = 0;
    }
    g_free(names);
    return (int)n;
}

static inline int carv_payload(ArvCamera *camera, uint32_t *bytes, char *err, size_t errlen) {
    GError *error = NULL;
    *bytes = arv_camera_get_payload(camera, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
static inline int carv_start_acquisition(ArvCamera *camera, char *err, size_t errlen) {
    GError *error = NULL;
    arv_camera_start_acquisition(camera, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}
static inline int carv_stop_acquisition(ArvCamera *camera, char *err, size_t errlen) {
    GError *error = NULL;
    arv_camera_stop_acquisition(camera, &error);
    return carv_take_error(error, err, errlen) ? -1 : 0;
}

// ---- the stream: buffers popped by the recorder's thread, pushed back once converted ----

/// A stream with `count` buffers of `payload` bytes queued; NULL with `err` on failure.
static inline ArvStream *carv_stream_open(ArvCamera *camera, uint32_t payload, unsigned count, char *err, size_t errlen) {
    GError *error = NULL;
    ArvStream *stream = arv_camera_create_stream(camera, NULL, NULL, &error);
    if (carv_take_error(error, err, errlen)) { if (stream) g_object_unref(stream); return NULL; }
    if (stream == NULL) { if (err && errlen) { strncpy(err, "no stream could be created", errlen - 1); err[errlen - 1] = 0; } return NULL; }
    // GigE Vision: the socket buffer sized from the payload (arv-camera-test's -a), else large frames lose packets.
    if (ARV_IS_GV_STREAM(stream))
        g_object_set(stream, "socket-buffer", ARV_GV_STREAM_SOCKET_BUFFER_AUTO, "socket-buffer-size", 0, NULL);
    for (unsigned i = 0; i < count; i++) arv_stream_push_buffer(stream, arv_buffer_new(payload, NULL));
    return stream;
}
static inline void carv_stream_close(ArvStream *stream) { if (stream) g_object_unref(stream); }
static inline ArvBuffer *carv_stream_pop(ArvStream *stream, uint64_t timeout_us) {
    return arv_stream_timeout_pop_buffer(stream, timeout_us);
}
static inline void carv_stream_push(ArvStream *stream, ArvBuffer *buffer) { arv_stream_push_buffer(stream, buffer); }

/// 0: a complete frame (ARV_BUFFER_STATUS_SUCCESS); anything else is a damaged or missing one.
static inline int carv_buffer_status(ArvBuffer *buffer) { return (int)arv_buffer_get_status(buffer); }
static inline const void *carv_buffer_data(ArvBuffer *buffer, size_t *size) { return arv_buffer_get_data(buffer, size); }
static inline uint64_t carv_buffer_timestamp_ns(ArvBuffer *buffer) { return arv_buffer_get_timestamp(buffer); }
static inline uint64_t carv_buffer_frame_id(ArvBuffer *buffer) { return arv_buffer_get_frame_id(buffer); }
static inline uint32_t carv_buffer_pixel_format(ArvBuffer *buffer) { return arv_buffer_get_image_pixel_format(buffer); }
static inline int carv_buffer_width(ArvBuffer *buffer) { return arv_buffer_get_image_width(buffer); }
static inline int carv_buffer_height(ArvBuffer *buffer) { return arv_buffer_get_image_height(buffer); }

/// Completed, failed and missing buffers the stream counted (GigE Vision: packets lost, frames dropped).
static inline void carv_stream_statistics(ArvStream *stream, uint64_t *completed, uint64_t *failures, uint64_t *underruns) {
    guint64 c = 0, f = 0, u = 0;
    arv_stream_get_statistics(stream, &c, &f, &u);
    *completed = c; *failures = f; *underruns = u;
}

#endif
