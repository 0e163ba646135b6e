#ifndef COORD_CZEROMQ_SHIM_H
#define COORD_CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>

// Values Swift may not import as constants.
static const int czmq_EAGAIN = EAGAIN;
static const int czmq_EINTR = EINTR;
static const int czmq_ETERM = ETERM;
static const int czmq_EHOSTUNREACH = EHOSTUNREACH;
#endif
