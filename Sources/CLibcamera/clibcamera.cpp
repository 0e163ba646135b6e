// The libcamera funnel: camera listing, one video stream, per-request controls and frames with their metadata,
// behind the C API of include/clibcamera.h. Only API common to libcamera 0.0.3 (Debian 12) and current releases.
#include "clibcamera.h"

#include <libcamera/libcamera.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace libcamera;

struct clc_manager {
    std::unique_ptr<CameraManager> manager;
};

namespace {

void copy_text(char *out, size_t len, const std::string &text) {
    if (!out || len == 0) return;
    size_t n = std::min(len - 1, text.size());
    std::memcpy(out, text.data(), n);
    out[n] = 0;
}

std::string listed_ids(CameraManager &manager) {
    std::string ids;
    for (const auto &camera : manager.cameras()) ids += (ids.empty() ? "" : ", ") + camera->id();
    return ids.empty() ? "none" : ids;
}

/// The controls every request carries until changed.
struct Settings {
    std::optional<int32_t> exposure_us;
    std::optional<float> gain, red, blue, lens;
    std::optional<int32_t> kelvin;
    std::optional<bool> ae, awb;
};

}  // namespace

struct clc_camera {
    std::shared_ptr<Camera> camera;
    std::unique_ptr<CameraConfiguration> config;
    std::unique_ptr<FrameBufferAllocator> allocator;
    std::vector<std::unique_ptr<Request>> requests;
    std::map<const FrameBuffer *, std::vector<const uint8_t *>> mapped;
    std::vector<std::pair<void *, size_t>> mappings;
    Stream *stream = nullptr;
    clc_frame_callback callback = nullptr;
    void *context = nullptr;
    bool running = false;
    std::mutex run_lock;  // a requeue (from the completion callback) against a stop: queued only while running

    std::mutex lock;  // guards the three below: the Swift side sets them, libcamera's thread reads them
    std::optional<int64_t> next_duration;
    Settings settings;
    bool settings_changed = false;

    void fill(ControlList &controls) {
        std::lock_guard<std::mutex> guard(lock);
        if (next_duration) {
            int64_t limits[2] = {*next_duration, *next_duration};
            controls.set(controls::FrameDurationLimits, Span<const int64_t, 2>(limits));
            next_duration.reset();
        }
        if (!settings_changed) return;
        settings_changed = false;
        const ControlInfoMap &info = camera->controls();
        auto has = [&](const ControlId &id) { return info.find(&id) != info.end(); };
        if (settings.ae && has(controls::AeEnable)) controls.set(controls::AeEnable, *settings.ae);
        if (settings.awb && has(controls::AwbEnable)) controls.set(controls::AwbEnable, *settings.awb);
        if (settings.exposure_us && has(controls::ExposureTime)) controls.set(controls::ExposureTime, *settings.exposure_us);
        if (settings.gain && has(controls::AnalogueGain)) controls.set(controls::AnalogueGain, *settings.gain);
        if (settings.red && settings.blue && has(controls::ColourGains)) {
            float gains[2] = {*settings.red, *settings.blue};
            controls.set(controls::ColourGains, Span<const float, 2>(gains));
        }
        if (settings.kelvin && has(controls::ColourTemperature)) controls.set(controls::ColourTemperature, *settings.kelvin);
        if (settings.lens && has(controls::LensPosition)) controls.set(controls::LensPosition, *settings.lens);
    }

    // On libcamera's thread: the frame's metadata and mapped planes to the callback, which only notes them. The
    // request goes back through clc_camera_requeue once its picture has been copied on the recorder's thread, so
    // libcamera's thread (which also dequeues the next buffer) never waits on a copy or a conversion.
    void completed(Request *request) {
        if (request->status() == Request::RequestCancelled) return;
        completed_count.fetch_add(1, std::memory_order_relaxed);
        const ControlList &metadata = request->metadata();
        auto buffer = request->buffers().begin()->second;
        const StreamConfiguration &sc = config->at(0);
        clc_frame frame{};
        const auto &planes = mapped[buffer];
        frame.plane_count = static_cast<uint32_t>(std::min<size_t>(3, planes.size()));
        for (uint32_t i = 0; i < frame.plane_count; i++) {
            frame.planes[i] = planes[i];
            frame.strides[i] = i == 0 ? sc.stride : sc.stride / 2;
        }
        frame.width = sc.size.width;
        frame.height = sc.size.height;
        frame.fourcc = sc.pixelFormat.fourcc();
        frame.sequence = buffer->metadata().sequence;
        frame.request = static_cast<uint32_t>(request->cookie());
        auto timestamp = metadata.get(controls::SensorTimestamp);
        frame.sensor_timestamp_ns = timestamp ? *timestamp : -1;
        auto exposure = metadata.get(controls::ExposureTime);
        frame.exposure_us = exposure ? *exposure : -1;
        auto duration = metadata.get(controls::FrameDuration);
        frame.frame_duration_us = duration ? *duration : -1;
        auto asked = request->controls().get(controls::FrameDurationLimits);
        frame.requested_duration_us = asked ? (*asked)[0] : -1;
        if (callback) callback(context, &frame);
    }

    std::atomic<uint64_t> completed_count{0};
};

extern "C" {

clc_manager *clc_manager_start(char *why, size_t why_len) {
    // libcamera logs to stderr by default: only its errors, unless the operator asks for more.
    setenv("LIBCAMERA_LOG_LEVELS", "*:ERROR", 0);
    auto m = std::make_unique<clc_manager>();
    m->manager = std::make_unique<CameraManager>();
    int ret = m->manager->start();
    if (ret) {
        copy_text(why, why_len, std::string("libcamera's camera manager cannot start: ") + std::strerror(-ret));
        return nullptr;
    }
    return m.release();
}

void clc_manager_stop(clc_manager *manager) {
    if (!manager) return;
    manager->manager->stop();
    delete manager;
}

int clc_camera_count(clc_manager *manager) { return static_cast<int>(manager->manager->cameras().size()); }

int clc_camera_info_at(clc_manager *manager, int index, clc_camera_info *out) {
    auto cameras = manager->manager->cameras();
    if (index < 0 || index >= static_cast<int>(cameras.size())) return -1;
    std::memset(out, 0, sizeof(*out));
    const auto &camera = cameras[index];
    copy_text(out->id, sizeof(out->id), camera->id());
    auto model = camera->properties().get(properties::Model);
    copy_text(out->model, sizeof(out->model), model ? *model : "");
    const ControlInfoMap &info = camera->controls();
    auto limits = info.find(&controls::FrameDurationLimits);
    if (limits != info.end()) {
        out->frame_duration_min_us = limits->second.min().get<int64_t>();
        out->frame_duration_max_us = limits->second.max().get<int64_t>();
    }
    auto has = [&](const ControlId &id) { return info.find(&id) != info.end() ? 1 : 0; };
    out->has_exposure_time = has(controls::ExposureTime);
    out->has_analogue_gain = has(controls::AnalogueGain);
    out->has_colour_gains = has(controls::ColourGains);
    out->has_colour_temperature = has(controls::ColourTemperature);
    out->has_lens_position = has(controls::LensPosition);
    // The formats of a video stream need no acquire: generateConfiguration only reads.
    auto config = camera->generateConfiguration({StreamRole::VideoRecording});
    if (config && config->size() > 0) {
        std::ostringstream text;
        const StreamFormats &formats = config->at(0).formats();
        bool first = true;
        for (const PixelFormat &format : formats.pixelformats()) {
            text << (first ? "" : "; ") << format.toString();
            first = false;
            auto sizes = formats.sizes(format);
            if (sizes.empty()) {
                SizeRange range = formats.range(format);
                text << " " << range.min.toString() << "-" << range.max.toString();
            }
            for (size_t i = 0; i < sizes.size(); i++) text << (i == 0 ? " " : ",") << sizes[i].toString();
        }
        copy_text(out->formats, sizeof(out->formats), text.str());
    }
    return 0;
}

clc_camera *clc_camera_open(clc_manager *manager, const char *id, uint32_t width, uint32_t height, char *why,
                            size_t why_len) {
    auto camera = manager->manager->get(id);
    if (!camera) {
        copy_text(why, why_len, std::string("libcamera has no camera ") + id + " (it lists " + listed_ids(*manager->manager) + ")");
        return nullptr;
    }
    if (camera->acquire()) {
        copy_text(why, why_len, std::string("libcamera camera ") + id + " is in use by another process");
        return nullptr;
    }
    auto c = std::make_unique<clc_camera>();
    c->camera = camera;
    c->config = camera->generateConfiguration({StreamRole::VideoRecording});
    if (!c->config || c->config->size() == 0) {
        camera->release();
        copy_text(why, why_len, std::string("libcamera camera ") + id + " offers no video stream");
        return nullptr;
    }
    StreamConfiguration &sc = c->config->at(0);
    auto offered = sc.formats().pixelformats();
    // YUV420 where offered; else packed YUYV, all a UVC webcam through libcamera's UVC pipeline offers raw.
    auto offers = [&](const PixelFormat &f) { return std::find(offered.begin(), offered.end(), f) != offered.end(); };
    if (offers(formats::YUV420)) sc.pixelFormat = formats::YUV420;
    else if (offers(formats::YUYV)) sc.pixelFormat = formats::YUYV;
    sc.size = Size(width, height);
    // Room beside those queued to the device; libcamera 0.0.3's UVC pipeline sets 4 whatever is asked.
    sc.bufferCount = std::max(sc.bufferCount, 8u);
    if (c->config->validate() == CameraConfiguration::Invalid || camera->configure(c->config.get()) < 0) {
        camera->release();
        copy_text(why, why_len, std::string("libcamera camera ") + id + " cannot be configured for " + std::to_string(width) +
                                    "x" + std::to_string(height));
        return nullptr;
    }
    c->stream = sc.stream();
    c->allocator = std::make_unique<FrameBufferAllocator>(camera);
    if (c->allocator->allocate(c->stream) < 0) {
        camera->release();
        copy_text(why, why_len, std::string("libcamera camera ") + id + ": its buffers cannot be allocated");
        return nullptr;
    }
    for (const auto &buffer : c->allocator->buffers(c->stream)) {
        // Planes may share one dmabuf: map each fd once, as long as its furthest plane reaches.
        std::map<int, size_t> lengths;
        for (const auto &plane : buffer->planes())
            lengths[plane.fd.get()] = std::max(lengths[plane.fd.get()], size_t(plane.offset) + plane.length);
        std::map<int, uint8_t *> bases;
        for (auto [fd, length] : lengths) {
            void *base = mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
            if (base == MAP_FAILED) continue;
            c->mappings.push_back({base, length});
            bases[fd] = static_cast<uint8_t *>(base);
        }
        std::vector<const uint8_t *> planes;
        for (const auto &plane : buffer->planes())
            planes.push_back(bases.count(plane.fd.get()) ? bases[plane.fd.get()] + plane.offset : nullptr);
        c->mapped[buffer.get()] = planes;
        auto request = camera->createRequest(c->requests.size());
        if (!request || request->addBuffer(c->stream, buffer.get()) < 0) {
            copy_text(why, why_len, std::string("libcamera camera ") + id + ": a request cannot be made");
            clc_camera_close(c.release());
            return nullptr;
        }
        c->requests.push_back(std::move(request));
    }
    return c.release();
}

void clc_camera_stream(clc_camera *camera, uint32_t *width, uint32_t *height, uint32_t *fourcc) {
    const StreamConfiguration &sc = camera->config->at(0);
    *width = sc.size.width;
    *height = sc.size.height;
    *fourcc = sc.pixelFormat.fourcc();
}

int clc_camera_start(clc_camera *camera, clc_frame_callback callback, void *context, char *why, size_t why_len) {
    camera->callback = callback;
    camera->context = context;
    camera->camera->requestCompleted.connect(camera, &clc_camera::completed);
    std::lock_guard<std::mutex> guard(camera->run_lock);
    ControlList start(camera->camera->controls());
    camera->fill(start);
    camera->running = true;
    if (camera->camera->start(&start) < 0) {
        camera->running = false;
        copy_text(why, why_len, "libcamera camera " + camera->camera->id() + " cannot start streaming");
        return -1;
    }
    for (auto &request : camera->requests) {
        // A request cancelled by an earlier stop is made new again.
        request->reuse(Request::ReuseBuffers);
        camera->fill(request->controls());
        camera->camera->queueRequest(request.get());
    }
    return 0;
}

int clc_camera_requeue(clc_camera *camera, uint32_t request) {
    std::lock_guard<std::mutex> guard(camera->run_lock);
    if (!camera->running || request >= camera->requests.size()) return -1;
    Request *r = camera->requests[request].get();
    r->reuse(Request::ReuseBuffers);
    camera->fill(r->controls());
    // Camera::queueRequest is thread-safe: it hands the request to the pipeline handler's thread.
    return camera->camera->queueRequest(r) < 0 ? -1 : 0;
}

uint64_t clc_camera_completed(clc_camera *camera) { return camera->completed_count.load(std::memory_order_relaxed); }

void clc_camera_request_duration(clc_camera *camera, int64_t us) {
    std::lock_guard<std::mutex> guard(camera->lock);
    camera->next_duration = us;
}

void clc_camera_set_controls(clc_camera *camera, int32_t exposure_us, float analogue_gain, float red_gain, float blue_gain,
                             int32_t colour_temperature_k, float lens_position, int ae_enable, int awb_enable) {
    std::lock_guard<std::mutex> guard(camera->lock);
    Settings &s = camera->settings;
    if (exposure_us >= 0) s.exposure_us = exposure_us;
    if (analogue_gain >= 0) s.gain = analogue_gain;
    if (red_gain >= 0 && blue_gain >= 0) { s.red = red_gain; s.blue = blue_gain; }
    if (colour_temperature_k >= 0) s.kelvin = colour_temperature_k;
    if (lens_position >= 0) s.lens = lens_position;
    if (ae_enable >= 0) s.ae = ae_enable != 0;
    if (awb_enable >= 0) s.awb = awb_enable != 0;
    camera->settings_changed = true;
}

void clc_camera_stop(clc_camera *camera) {
    {
        std::lock_guard<std::mutex> guard(camera->run_lock);
        if (!camera->running) return;
        camera->running = false;
    }
    // Not under run_lock: Camera::stop() waits for the pipeline handler's thread, which may be completing a request
    // at this moment and asking run_lock to requeue it. Held, each waited for the other for ever (a take whose
    // camera never finished); released, that requeue sees `running` false and returns at once.
    camera->camera->stop();
    camera->camera->requestCompleted.disconnect(camera, &clc_camera::completed);
}

void clc_camera_close(clc_camera *camera) {
    if (!camera) return;
    clc_camera_stop(camera);
    camera->requests.clear();
    for (auto [base, length] : camera->mappings) munmap(base, length);
    if (camera->allocator && camera->stream) camera->allocator->free(camera->stream);
    camera->allocator.reset();
    camera->camera->release();
    delete camera;
}

}  // extern "C"
