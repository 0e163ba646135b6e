// Measures uvcvideo's dequeue rate through plain V4L2 MMAP: v4probe DEVICE SECONDS BUFFERS
#include <fcntl.h>
#include <linux/videodev2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <poll.h>
static long long now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDWR); double secs = atof(argv[2]); int nb = atoi(argv[3]);
    struct v4l2_format f = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE}; ioctl(fd, VIDIOC_G_FMT, &f);
    f.fmt.pix.width = 320; f.fmt.pix.height = 180; f.fmt.pix.pixelformat = V4L2_PIX_FMT_YUYV;
    if (ioctl(fd, VIDIOC_S_FMT, &f)) perror("S_FMT");
    struct v4l2_streamparm p = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE}; ioctl(fd, VIDIOC_G_PARM, &p);
    printf("interval %u/%u\n", p.parm.capture.timeperframe.numerator, p.parm.capture.timeperframe.denominator);
    struct v4l2_requestbuffers rb = {.count = nb, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE, .memory = V4L2_MEMORY_MMAP};
    ioctl(fd, VIDIOC_REQBUFS, &rb);
    for (unsigned i = 0; i < rb.count; i++) { struct v4l2_buffer b = {.index = i, .type = rb.type, .memory = rb.memory}; ioctl(fd, VIDIOC_QBUF, &b); }
    int t = V4L2_BUF_TYPE_VIDEO_CAPTURE; ioctl(fd, VIDIOC_STREAMON, &t);
    long long end = now_ns() + (long long)(secs * 1e9), first = -1, last = -1, maxgap = 0; int n = 0, late = 0;
    while (now_ns() < end) {
        struct pollfd pf = {fd, POLLIN}; if (poll(&pf, 1, 200) <= 0) continue;
        struct v4l2_buffer b = {.type = rb.type, .memory = rb.memory};
        if (ioctl(fd, VIDIOC_DQBUF, &b)) continue;
        long long ts = b.timestamp.tv_sec * 1000000000LL + b.timestamp.tv_usec * 1000LL;
        if (first < 0) first = ts; if (last >= 0) { if (ts - last > maxgap) maxgap = ts - last; if (ts - last > 50000000) late++; }
        last = ts; n++;
        ioctl(fd, VIDIOC_QBUF, &b);
    }
    ioctl(fd, VIDIOC_STREAMOFF, &t);
    double span = (last - first) / 1e9;
    printf("frames %d in %.2f s: %.1f fps; max stamp gap %.1f ms; gaps>50ms %d\n", n, span, span > 0 ? (n - 1) / span : 0, maxgap / 1e6, late);
    return 0;
}
