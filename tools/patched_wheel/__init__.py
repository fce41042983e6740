"""Build patched ``torch_tensorrt`` wheels from the official releases.

The build takes an official ``torch-tensorrt`` wheel (the *base*), splices the fork's overlay
``py/torch_tensorrt/dynamo/utils.py`` into the base's ``torch_tensorrt/dynamo/utils.py``,
gives the result a local version label, and writes a new wheel whose RECORD is computed
afresh. Every other file of the base is copied byte for byte.

Modules, by role. The core (reading, planning, writing) never imports the network:

* :mod:`patched_wheel.policy`: supported releases, platforms, the label, the fixes;
* :mod:`patched_wheel.paths`: where the repository keeps the overlay, the lock, the cache;
* :mod:`patched_wheel.wheelfile`: the one owner of the wheel format (read and verify from
  bytes, write with RECORD computed and the result verified);
* :mod:`patched_wheel.lock`: the lock of the official wheels' sha256, and its rules;
* :mod:`patched_wheel.base`: a base read once and verified (lock, then wheel format);
* :mod:`patched_wheel.sources`, :mod:`patched_wheel.splice`, :mod:`patched_wheel.callsites`,
  :mod:`patched_wheel.overlay`: Python sources, the pure splice, the call-site check, the
  overlay parsed once;
* :mod:`patched_wheel.labels`: the version label of an overlay, from the registry of
  released overlays, and the way back from a patched version to its base's;
* :mod:`patched_wheel.provenance`, :mod:`patched_wheel.provenance_record`: which code made a
  thing, and the record of it inside every patched wheel;
* :mod:`patched_wheel.plan`: the patch as data, every member of the patched wheel;
  :mod:`patched_wheel.build`: plan, then write;
* :mod:`patched_wheel.origin`, :mod:`patched_wheel.history`: a wheel's record checked, and
  the overlay it names found in git history (for ``verify``).

The shell, which may use the network:

* :mod:`patched_wheel.choice`, :mod:`patched_wheel.installed`: what the user asks for;
* :mod:`patched_wheel.download`: pip and the index's list of files;
* :mod:`patched_wheel.resolve`: a choice to a verified base, through the cache;
* :mod:`patched_wheel.refresh`, :mod:`patched_wheel.matrix`: the lock and release commands.
"""

from __future__ import annotations

__all__ = ["PatchError"]


class PatchError(Exception):
    """A base wheel, an overlay or a setting that the build refuses.

    The message names the thing refused and says what to do. It is the only exception type
    the build raises on purpose; the command line catches it once and exits with status 1.
    """
