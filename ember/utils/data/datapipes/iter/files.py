"""FileLister (``list_files``), FileOpener (``open_files``), StreamReader (``read_from_stream``),
and RoutedDecoder (``routed_decode``, not provided)."""
from .._common import file_binaries_from_pathnames, file_pathnames_from_root
from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ._len import no_length
from .utils import IterableWrapperIterDataPipe

__all__ = ["FileListerIterDataPipe", "FileOpenerIterDataPipe", "RoutedDecoderIterDataPipe",
           "StreamReaderIterDataPipe"]


@functional_datapipe("list_files")
class FileListerIterDataPipe(IterDataPipe):
    """Paths of the files under each root (a path, a list of paths or a datapipe of paths) whose
    names match ``masks`` (fnmatch patterns), sorted unless ``non_deterministic``. ``len()`` only
    when ``length`` is given."""

    def __init__(self, root=".", masks="", *, recursive=False, abspath=False, non_deterministic=False, length=-1):
        super().__init__()
        if isinstance(root, str):
            root = [root]
        if not isinstance(root, IterDataPipe):
            root = IterableWrapperIterDataPipe(root)
        self.datapipe = root
        self.masks = masks
        self.recursive = recursive
        self.abspath = abspath
        self.non_deterministic = non_deterministic
        self.length = length

    def __iter__(self):
        for path in self.datapipe:
            yield from file_pathnames_from_root(path, self.masks, self.recursive, self.abspath,
                                                self.non_deterministic)

    def __len__(self):
        if self.length == -1:
            raise no_length(self)
        return self.length


@functional_datapipe("open_files")
class FileOpenerIterDataPipe(IterDataPipe):
    """``(path, stream)`` for each path; the stream is a ``StreamWrapper`` over ``open(path, mode)``
    (closed when dropped). ``mode``: ``"r"``, ``"b"``/``"rb"`` or ``"t"``/``"rt"``."""

    def __init__(self, datapipe, mode="r", encoding=None, length=-1):
        super().__init__()
        self.datapipe = datapipe
        self.mode = mode
        self.encoding = encoding
        if self.mode not in ("b", "t", "rb", "rt", "r"):
            raise ValueError(f"Invalid mode {mode}")
        if "b" in mode and encoding is not None:
            raise ValueError("binary mode doesn't take an encoding argument")
        self.length = length

    def __iter__(self):
        yield from file_binaries_from_pathnames(self.datapipe, self.mode, self.encoding)

    def __len__(self):
        if self.length == -1:
            raise no_length(self)
        return self.length


@functional_datapipe("read_from_stream")
class StreamReaderIterDataPipe(IterDataPipe):
    """``(path, data)`` read from each ``(path, stream)``: all of it, or ``chunk`` bytes at a time;
    the stream is closed once read."""

    def __init__(self, datapipe, chunk=None):
        self.datapipe = datapipe
        self.chunk = chunk

    def __iter__(self):
        for furl, stream in self.datapipe:
            while True:
                data = stream.read(self.chunk) if self.chunk else stream.read()
                if not data:
                    stream.close()
                    break
                yield furl, data


@functional_datapipe("routed_decode")
class RoutedDecoderIterDataPipe(IterDataPipe):
    """Not provided (PyTorch's is deprecated): decoding by file extension."""

    def __init__(self, datapipe, *handlers, key_fn=None):
        raise NotImplementedError(
            "ember.utils.data.datapipes: RoutedDecoder (routed_decode) is not supported; decode the "
            "(path, stream) pairs with .map(...) instead")
