// What Swift cannot call in alsa-lib directly (the *_alloca macros, errno constants), prefixed calsa_.
#ifndef COORD_CALSA_SHIM_H
#define COORD_CALSA_SHIM_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <alsa/asoundlib.h>

static const int calsa_EPIPE = EPIPE;
static const int calsa_ESTRPIPE = ESTRPIPE;
static const int calsa_EAGAIN = EAGAIN;
static const int calsa_ENODEV = ENODEV;
static const int calsa_EIO = EIO;
static const int calsa_EBADFD = EBADFD;

/// Opens `device` for blocking capture of interleaved S16_LE at exactly `rate` Hz and `channels` channels, periods
/// of about `period_frames`. On failure returns a negative ALSA error and writes one sentence into `why`.
static inline int calsa_open_capture(const char *device, unsigned rate, unsigned channels, unsigned long period_frames,
                                     snd_pcm_t **out, char *why, size_t why_size) {
    snd_pcm_t *pcm = NULL;
    int r = snd_pcm_open(&pcm, device, SND_PCM_STREAM_CAPTURE, 0);
    if (r < 0) { snprintf(why, why_size, "cannot open ALSA capture device %s: %s", device, snd_strerror(r)); return r; }
    snd_pcm_hw_params_t *hw;
    snd_pcm_hw_params_alloca(&hw);
    const char *step = "read its capabilities";
    if ((r = snd_pcm_hw_params_any(pcm, hw)) < 0) goto fail;
    step = "choose interleaved access";
    if ((r = snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)) < 0) goto fail;
    step = "choose 16-bit samples";
    if ((r = snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE)) < 0) goto fail;
    step = "choose the channel count";
    if ((r = snd_pcm_hw_params_set_channels(pcm, hw, channels)) < 0) goto fail;
    // No resampling inside ALSA: the node measures the device's own clock and retimes the sound itself.
    step = "turn off ALSA's resampling";
    snd_pcm_hw_params_set_rate_resample(pcm, hw, 0);
    step = "choose the sample rate";
    if ((r = snd_pcm_hw_params_set_rate(pcm, hw, rate, 0)) < 0) goto fail;
    step = "choose the period size";
    snd_pcm_uframes_t period = period_frames;
    int dir = 0;
    if ((r = snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &dir)) < 0) goto fail;
    snd_pcm_uframes_t buffer = period * 8;
    step = "choose the buffer size";
    if ((r = snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer)) < 0) goto fail;
    step = "apply the settings";
    if ((r = snd_pcm_hw_params(pcm, hw)) < 0) goto fail;
    step = "start capturing";
    if ((r = snd_pcm_prepare(pcm)) < 0) goto fail;
    if ((r = snd_pcm_start(pcm)) < 0) goto fail;
    *out = pcm;
    return 0;
fail:
    snprintf(why, why_size, "ALSA device %s cannot %s (%u Hz, %u channel(s), 16-bit): %s", device, step, rate, channels, snd_strerror(r));
    snd_pcm_close(pcm);
    return r;
}

/// Writes the name of the sound card behind an open PCM (e.g. "Dummy", "Loopback") into `name`; returns 0, or -1
/// when the PCM is no card's (a plugin such as pulse or dmix over none) and `name` is left as it was.
static inline int calsa_card_name(snd_pcm_t *pcm, char *name, size_t name_size) {
    snd_pcm_info_t *info;
    snd_pcm_info_alloca(&info);
    if (snd_pcm_info(pcm, info) < 0) return -1;
    int card = snd_pcm_info_get_card(info);
    char *got = NULL;
    if (card < 0 || snd_card_get_name(card, &got) < 0 || got == NULL) return -1;
    snprintf(name, name_size, "%s", got);
    free(got);
    return 0;
}

/// Reads up to `frames` frames; returns the count, or a negative ALSA error. `*delay` gets the frames still
/// waiting in the device's buffer right after the read, `*now_us` CLOCK_MONOTONIC (µs) at that moment.
static inline long calsa_read(snd_pcm_t *pcm, int16_t *buffer, unsigned long frames, long *delay, int64_t *now_us) {
    snd_pcm_sframes_t n = snd_pcm_readi(pcm, buffer, frames);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *now_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    snd_pcm_sframes_t d = 0;
    if (n >= 0 && snd_pcm_delay(pcm, &d) < 0) d = 0;
    *delay = (long)d;
    return (long)n;
}

static inline const char *calsa_strerror(int e) { return snd_strerror(e); }
#endif
