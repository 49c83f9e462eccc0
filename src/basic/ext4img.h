/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* ext4 images on loop devices: what a volume (src/volume) and a sandbox's
 * bounded writable layer (src/runtime/disk.c) are made of. The image is a
 * sparse file whose size is the quota: the kernel enforces it (ENOSPC)
 * and a full image touches nothing else on the host. Blocking (mkfs is a
 * child process, a few tens of ms): run it off the event loop. */

#include <stdint.h>
#include <sys/stat.h>

#include "basic/err.h"

/* ext4img_mkfs flags */
#define EXT4IMG_NO_JOURNAL                                                                         \
        (1u << 0) /* no journal, no resize reserve: a                                              \
                   * layer that never outlives a crash */

/* Run mkfs.ext4 on the existing file img (its size is the file system's):
 * inodes inodes (0 = mkfs's default ratio), no reserved blocks, root dir
 * owned by 0:0, inode tables left to be zeroed lazily (a sparse image
 * reads zeros there anyway). */
int ext4img_mkfs(const char *img, uint64_t inodes, unsigned flags, struct wr_err *e);

/* ext4img_mkfs, with the file system's root populated from the directory
 * root (mkfs.ext4 -d: its entries, modes and owners; NULL = empty). */
int ext4img_mkfs_from(const char *img, uint64_t inodes, unsigned flags, const char *root,
                      struct wr_err *e);

/* The loop device already backed by the file st names (dev/ino), opened
 * O_RDONLY, its path in dev; or -ENOENT. Mounting that device again
 * shares the superblock in use (two superblocks on one image would
 * corrupt it). */
int ext4img_loop_find(const struct stat *st, char dev[static 32]);

/* Attach img (an fd open O_RDWR; path is for the device's name) to a free
 * loop device that clears itself when its last user goes
 * (LO_FLAGS_AUTOCLEAR; direct I/O when the host file system takes it).
 * Returns the device's fd (O_RDWR), its path in dev, or a negative errno
 * with e filled. */
int ext4img_loop_attach(int img, const char *path, char dev[static 32], struct wr_err *e);
