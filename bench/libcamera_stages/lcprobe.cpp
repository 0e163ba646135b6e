// Measures libcamera's requestCompleted rate for one camera: lcprobe SECONDS BUFFERS WORK_US [copy]
#include <libcamera/libcamera.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>
using namespace libcamera;
static std::shared_ptr<Camera> cam;
static std::vector<int64_t> stamps, arrivals;
static int work_us = 0; static bool do_copy = false;
static std::map<const FrameBuffer *, std::pair<void *, size_t>> maps;
static std::vector<uint8_t> sink(1 << 22);
static int64_t now_ns() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static void done(Request *r) {
    if (r->status() == Request::RequestCancelled) return;
    arrivals.push_back(now_ns());
    auto ts = r->metadata().get(controls::SensorTimestamp);
    stamps.push_back(ts ? *ts : -1);
    auto *b = r->buffers().begin()->second;
    if (do_copy) { auto m = maps[b]; std::memcpy(sink.data(), m.first, std::min(m.second, sink.size())); }
    if (work_us) { int64_t end = now_ns() + work_us * 1000LL; while (now_ns() < end) {} }
    r->reuse(Request::ReuseBuffers);
    cam->queueRequest(r);
}
int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 5; unsigned nbuf = argc > 2 ? atoi(argv[2]) : 4;
    work_us = argc > 3 ? atoi(argv[3]) : 0; do_copy = argc > 4 && !strcmp(argv[4], "copy");
    CameraManager m; m.start();
    if (m.cameras().empty()) { printf("no camera\n"); return 1; }
    cam = m.cameras()[0]; cam->acquire();
    auto cfg = cam->generateConfiguration({StreamRole::VideoRecording});
    auto &sc = cfg->at(0); sc.pixelFormat = formats::YUYV; sc.size = Size(320, 180); sc.bufferCount = nbuf;
    cfg->validate(); cam->configure(cfg.get());
    FrameBufferAllocator alloc(cam); alloc.allocate(sc.stream());
    std::vector<std::unique_ptr<Request>> reqs;
    for (auto &b : alloc.buffers(sc.stream())) {
        size_t len = 0; for (auto &p : b->planes()) len = std::max(len, size_t(p.offset + p.length));
        maps[b.get()] = {mmap(nullptr, len, PROT_READ, MAP_SHARED, b->planes()[0].fd.get(), 0), len};
        auto r = cam->createRequest(); r->addBuffer(sc.stream(), b.get()); reqs.push_back(std::move(r));
    }
    printf("config %s buffers %zu\n", sc.toString().c_str(), reqs.size());
    cam->requestCompleted.connect(done);
    cam->start();
    for (auto &r : reqs) cam->queueRequest(r.get());
    usleep(useconds_t(seconds * 1e6));
    cam->stop();
    size_t n = stamps.size();
    int64_t maxgap = 0; int late = 0;
    for (size_t i = 1; i < n; i++) { int64_t g = stamps[i] - stamps[i - 1]; maxgap = std::max(maxgap, g); if (g > 50000000) late++; }
    double span = n > 1 ? (stamps[n - 1] - stamps[0]) / 1e9 : 0;
    printf("frames %zu in %.2f s: %.1f fps; max stamp gap %.1f ms; gaps>50ms %d; work %d us copy %d\n", n, span,
           span > 0 ? (n - 1) / span : 0, maxgap / 1e6, late, work_us, do_copy);
    cam->release();
    return 0;
}
