// Package image imports container images into a plain directory tree, the
// root filesystem of a Berth sandbox template.
//
// [Unpack] reads an OCI image layout (a directory, or a tar of one) or a
// `docker save` tarball, in both its legacy form (manifest.json with
// <id>/layer.tar) and its newer form, which is also an OCI layout. It picks
// one image by tag or digest, and the linux manifest for the wanted
// architecture when an image index lists several, then applies the layers in
// order with overlay semantics: `.wh.NAME` whiteouts hide NAME from earlier
// layers, and `.wh..wh..opq` hides a directory's earlier contents.
//
// # Trust
//
// Images are untrusted input and Unpack is a security boundary:
//
//   - Every blob is checked against its descriptor's size and sha256 digest,
//     and every layer's uncompressed stream against the diff ID in the image
//     config (the only check a legacy layer.tar has).
//   - Every file operation goes through an [os.Root] on the destination, and
//     Unpack also never follows a symlink the image planted: an entry whose
//     parent directory is a symlink, even one pointing inside the tree, is
//     rejected ("unsafe_path"), as are `..` components and hard links to
//     anything but an existing regular file reached through real directories.
//     Absolute entry names are taken relative to the image root, as Docker
//     does. Symlinks are created as they are: their targets, absolute or not,
//     are resolved later inside the sandbox.
//   - Device nodes and FIFOs are skipped: sandboxes cannot create them.
//     Setuid and setgid bits are dropped; permissions and the sticky bit are
//     kept, as are mtimes (except a symlink's own). Extended attributes are
//     ignored.
//   - Everything is owned by 0:0 when Berth runs as root (and by Berth's user
//     otherwise). The image's own uid and gid numbers are not kept: in the
//     sandbox files stay owned by root, and outside it the image's numbers
//     would name real host users.
//   - Regular file content is bounded by [Options.MaxBytes], and entries,
//     names and JSON documents have fixed caps.
//   - Once every layer is applied, the paths in [Options.MountPoints] (the
//     caller's mount points, such as /proc) must be real directories or
//     absent ("image_mount_point_invalid"): a runtime would mount through a
//     link there.
//
// # Errors
//
// Errors carry [errcode] codes and reasons: Invalid with "image_invalid",
// "image_ambiguous", "image_platform_mismatch", "blob_digest_mismatch",
// "unsafe_path" or "image_mount_point_invalid"; NotFound with
// "image_not_found"; PayloadTooLarge with "image_too_large" or
// "image_too_many_entries"; Unimplemented with "digest_unsupported" or
// "layer_media_type_unsupported".
//
// Unpack does not clean up after a failure: the destination is left
// half-written. Callers unpack into a fresh temporary directory next to the
// final location and rename it into place only when Unpack succeeds.
package image
