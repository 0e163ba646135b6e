// What Swift cannot import from the kernel's GPIO v2 character-device uAPI (<linux/gpio.h>): the _IOWR() request
// numbers, and the request/config structs with their unions, filled here. Every wrapper returns -1 with errno set on
// failure, exactly like the ioctl it wraps; turning errno into a sentence is the Swift funnel's job
// (Sources/Platform/GPIOLine.swift), and no GPIO request number lives elsewhere. No libgpiod: the uAPI is stable
// since Linux 5.10 and needs no package (libgpiod 1.6 and 2.x differ in API).
#ifndef CGPIO_SHIM_H
#define CGPIO_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/gpio.h>

/// Number of lines of the chip open on `chip_fd` (GPIO_GET_CHIPINFO_IOCTL); -1 with errno (ENOTTY: not a gpiochip).
static inline int cgpio_chip_lines(int chip_fd) {
    struct gpiochip_info info;
    memset(&info, 0, sizeof info);
    if (ioctl(chip_fd, GPIO_GET_CHIPINFO_IOCTL, &info) < 0) return -1;
    return (int)info.lines;
}

/// Copies line `offset`'s consumer label (empty if unused) into `consumer` (at least 32 bytes); 1 if the line is
/// in use, 0 if not, -1 with errno.
static inline int cgpio_line_consumer(int chip_fd, uint32_t offset, char *consumer) {
    struct gpio_v2_line_info info;
    memset(&info, 0, sizeof info);
    info.offset = offset;
    if (ioctl(chip_fd, GPIO_V2_GET_LINEINFO_IOCTL, &info) < 0) return -1;
    memcpy(consumer, info.consumer, GPIO_MAX_NAME_SIZE);
    consumer[GPIO_MAX_NAME_SIZE - 1] = 0;
    return (info.flags & GPIO_V2_LINE_FLAG_USED) ? 1 : 0;
}

/// Requests line `offset` of the chip as an output labelled `consumer`, active-low if asked, starting inactive;
/// returns the line's file descriptor (GPIO_V2_GET_LINE_IOCTL), or -1 with errno.
static inline int cgpio_request_output(int chip_fd, uint32_t offset, const char *consumer, int active_low) {
    struct gpio_v2_line_request req;
    memset(&req, 0, sizeof req);
    req.offsets[0] = offset;
    req.num_lines = 1;
    strncpy(req.consumer, consumer, GPIO_MAX_NAME_SIZE - 1);
    req.config.flags = GPIO_V2_LINE_FLAG_OUTPUT | (active_low ? GPIO_V2_LINE_FLAG_ACTIVE_LOW : 0);
    req.config.num_attrs = 1;
    req.config.attrs[0].mask = 1;
    req.config.attrs[0].attr.id = GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES;
    req.config.attrs[0].attr.values = 0;
    if (ioctl(chip_fd, GPIO_V2_GET_LINE_IOCTL, &req) < 0) return -1;
    return req.fd;
}

/// Drives the requested line active (1) or inactive (0) (GPIO_V2_LINE_SET_VALUES_IOCTL); 0, or -1 with errno.
static inline int cgpio_set(int line_fd, int active) {
    struct gpio_v2_line_values values;
    values.bits = active ? 1 : 0;
    values.mask = 1;
    return ioctl(line_fd, GPIO_V2_LINE_SET_VALUES_IOCTL, &values);
}

#endif
