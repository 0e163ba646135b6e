// What Swift cannot import from FFmpeg (function-like macros, compound constants), prefixed cff_.
#ifndef COORD_CFFMPEG_SHIM_H
#define COORD_CFFMPEG_SHIM_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/error.h>
#include <libavutil/dict.h>
#include <libavutil/mathematics.h>
// The multiview movie's filter graph (LibAV/MultiviewGraph.swift): its declarations only, the library is loaded by
// cff_avfilter_load below.
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersrc.h>
#include <libavfilter/buffersink.h>
#include <dlfcn.h>

/// AVERROR(e): the negative error code FFmpeg uses for a POSIX errno.
static inline int cff_averror(int posixErrno) { return AVERROR(posixErrno); }

static const int cff_AVERROR_EOF = AVERROR_EOF;
static const int cff_EAGAIN_error = AVERROR(EAGAIN);
static const int cff_AVERROR_EINVAL = AVERROR(EINVAL);
static const int cff_AVERROR_ENOMEM = AVERROR(ENOMEM);
static const int cff_AVERROR_ENCODER_NOT_FOUND = AVERROR_ENCODER_NOT_FOUND;
static const int64_t cff_AV_NOPTS_VALUE = AV_NOPTS_VALUE;
static const int cff_FF_QP2LAMBDA = FF_QP2LAMBDA;
static const int cff_AV_CODEC_FLAG_QSCALE = AV_CODEC_FLAG_QSCALE;
static const int cff_AV_CODEC_FLAG_GLOBAL_HEADER = AV_CODEC_FLAG_GLOBAL_HEADER;
static const int cff_AVFMT_GLOBALHEADER = AVFMT_GLOBALHEADER;
static const int cff_AVFMT_NOFILE = AVFMT_NOFILE;
static const int cff_AVIO_FLAG_WRITE = AVIO_FLAG_WRITE;
static const int cff_AV_PKT_FLAG_KEY = AV_PKT_FLAG_KEY;
static const int cff_AV_PKT_FLAG_CORRUPT = AV_PKT_FLAG_CORRUPT;
static const int cff_AV_ERROR_MAX_STRING_SIZE = AV_ERROR_MAX_STRING_SIZE;

/// av_strerror into a caller buffer; always NUL-terminated. Returns the av_strerror result.
static inline int cff_err2str(int errnum, char *buf, size_t size) {
    if (size == 0) return -1;
    int r = av_strerror(errnum, buf, size);
    buf[size - 1] = 0;
    return r;
}

/// av_opt_set_int without the variadic-free but enum-typed flags argument dance.
static inline int cff_opt_set_int(void *obj, const char *name, int64_t value, int searchFlags) {
    return av_opt_set_int(obj, name, value, searchFlags);
}

/// av_opt_set searching child objects too (codec private options like libx264 "preset").
static inline int cff_opt_set_child(void *obj, const char *name, const char *value) {
    return av_opt_set(obj, name, value, AV_OPT_SEARCH_CHILDREN);
}

static const int cff_AVSEEK_SIZE = AVSEEK_SIZE;
static const int cff_AVSEEK_FORCE = AVSEEK_FORCE;

/// avio_alloc_context for a writer with its own file: `write` takes a const buffer whatever this FFmpeg's
/// prototype says (libavformat 61 made it const), so one Swift callback fits both.
static inline AVIOContext *cff_avio_alloc_write_context(int bufferSize, void *opaque,
                                                        int (*write)(void *, const uint8_t *, int),
                                                        int64_t (*seek)(void *, int64_t, int)) {
    unsigned char *buffer = av_malloc((size_t)bufferSize);
    if (!buffer) return NULL;
    AVIOContext *pb = avio_alloc_context(buffer, bufferSize, 1, opaque, NULL,
                                         (__typeof__(((AVIOContext *)0)->write_packet))write, seek);
    if (!pb) av_free(buffer);
    return pb;
}

/// Frees a context made by cff_avio_alloc_write_context and its buffer (the file is the caller's to close).
static inline void cff_avio_free_write_context(AVIOContext **pb) {
    if (!pb || !*pb) return;
    av_freep(&(*pb)->buffer);
    avio_context_free(pb);
}

/// The custom writer's one disk call Swift's Glibc does not declare (it needs _GNU_SOURCE): fallocate(2).
/// Returns 0, or the errno. The mode from <linux/falloc.h>.
static const int cff_FALLOC_FL_KEEP_SIZE = 0x01;
extern int fallocate64(int fd, int mode, int64_t offset, int64_t length);
static inline int cff_fallocate(int fd, int mode, int64_t offset, int64_t length) {
    int r;
    do { r = fallocate64(fd, mode, offset, length); } while (r != 0 && errno == EINTR);
    return r == 0 ? 0 : errno;
}

/// libavfilter's calls, loaded when a multiview is made rather than linked: libavfilter's own dependencies (ALSA
/// through Debian's libflite among them) would otherwise load with coord and coord-node at every start.
typedef struct cff_avfilter {
    __typeof__(&avfilter_graph_alloc) graph_alloc;
    __typeof__(&avfilter_graph_free) graph_free;
    __typeof__(&avfilter_get_by_name) get_by_name;
    __typeof__(&avfilter_graph_create_filter) graph_create_filter;
    __typeof__(&avfilter_inout_alloc) inout_alloc;
    __typeof__(&avfilter_inout_free) inout_free;
    __typeof__(&avfilter_graph_parse_ptr) graph_parse_ptr;
    __typeof__(&avfilter_graph_config) graph_config;
    __typeof__(&av_buffersrc_add_frame_flags) buffersrc_add_frame_flags;
    __typeof__(&av_buffersink_get_frame) buffersink_get_frame;
    __typeof__(&av_buffersink_set_frame_size) buffersink_set_frame_size;
    __typeof__(&av_buffersink_get_time_base) buffersink_get_time_base;
} cff_avfilter;

#define CFF_STRINGIFY2(x) #x
#define CFF_STRINGIFY(x) CFF_STRINGIFY2(x)
/// The libavfilter these headers describe (libavfilter.so.8 on Debian 12).
static const char *const cff_avfilter_soname = "libavfilter.so." CFF_STRINGIFY(LIBAVFILTER_VERSION_MAJOR);

/// Fills `api` from libavfilter (loaded once, never unloaded). Returns NULL, or dlerror's words.
static inline const char *cff_avfilter_load(cff_avfilter *api) {
    void *library = dlopen(cff_avfilter_soname, RTLD_NOW | RTLD_LOCAL);
    if (!library) return dlerror();
#define CFF_AVFILTER_SYMBOL(field, name) \
    if (!(api->field = (__typeof__(api->field))dlsym(library, #name))) return dlerror();
    CFF_AVFILTER_SYMBOL(graph_alloc, avfilter_graph_alloc)
    CFF_AVFILTER_SYMBOL(graph_free, avfilter_graph_free)
    CFF_AVFILTER_SYMBOL(get_by_name, avfilter_get_by_name)
    CFF_AVFILTER_SYMBOL(graph_create_filter, avfilter_graph_create_filter)
    CFF_AVFILTER_SYMBOL(inout_alloc, avfilter_inout_alloc)
    CFF_AVFILTER_SYMBOL(inout_free, avfilter_inout_free)
    CFF_AVFILTER_SYMBOL(graph_parse_ptr, avfilter_graph_parse_ptr)
    CFF_AVFILTER_SYMBOL(graph_config, avfilter_graph_config)
    CFF_AVFILTER_SYMBOL(buffersrc_add_frame_flags, av_buffersrc_add_frame_flags)
    CFF_AVFILTER_SYMBOL(buffersink_get_frame, av_buffersink_get_frame)
    CFF_AVFILTER_SYMBOL(buffersink_set_frame_size, av_buffersink_set_frame_size)
    CFF_AVFILTER_SYMBOL(buffersink_get_time_base, av_buffersink_get_time_base)
#undef CFF_AVFILTER_SYMBOL
    return NULL;
}

/// Quiet libav* logging below errors (the caller turns every failure into a thrown error).
static inline void cff_log_quiet(void) { av_log_set_level(AV_LOG_ERROR); }

#endif
