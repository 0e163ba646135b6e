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

/// Quiet libav* logging below errors (the caller turns every failure into a thrown error).
static inline void cff_log_quiet(void) { av_log_set_level(AV_LOG_ERROR); }

#endif
