/* version.h - pardo's version, as `pardo --version` prints it and traces record it ("otherData": "pardo"). */
#ifndef PARDO_VERSION_H
#define PARDO_VERSION_H

#ifndef PARDO_VERSION
#define PARDO_VERSION "0.1.0"
#endif

#endif
