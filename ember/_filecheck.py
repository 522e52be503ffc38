"""``ember.testing.FileCheck``: LLVM-FileCheck-style assertions on text (torch.testing.FileCheck).

Tests use it to assert what generated code contains -- ``FileCheck().check("def forward")
.check_not("aten.").check_count("buf", 3, exactly=True).run(code)`` -- and PyTorch's test
suites are full of such chains, so ember takes the same checks with the same matching rules
and raises the same ``RuntimeError`` text (the failing range drawn with ``~~~ <--- HERE``
under it, two lines of context either side).

The matching rules, as PyTorch's:
  * checks run in order, each searching from where the previous match ended;
  * consecutive ``check_dag`` checks form one group matched in any order (the group spans
    from its first to its last match); consecutive ``check_not`` checks form one group that
    must not occur between the previous match and the next check's match (or the end);
  * ``check_same`` must match on the previous match's line, ``check_next`` on the line after;
  * ``check_count(s, n, exactly=True)`` is ``n`` matches followed by a ``check_not(s)``;
  * ``check_source_highlighted(s)`` wants ``s`` underlined by exactly ``len(s)`` tildes on
    the next line and does not move the search position;
  * ``check_regex(p)``: PyTorch searches the rest of the text and records the match at its
    offset *within that rest* (not in the whole text) and ``len(p)`` long; ember records the
    same, so a chain behaves identically under both (Python's ``re`` stands in for
    ``std::regex``'s ECMAScript grammar: the common syntax is the same).
  * ``run(checks, text)`` first reads ``# CHECK: ...`` / ``# CHECK-NEXT:`` / ``-SAME`` /
    ``-NOT`` / ``-DAG`` / ``-COUNT-n`` / ``-COUNT-EXACTLY-n`` / ``-SOURCE-HIGHLIGHTED`` /
    ``-REGEX`` directives out of ``checks``.

Offsets are UTF-8 byte offsets, as in PyTorch's C++ (so the tilde runs under non-ASCII text
have PyTorch's widths).
"""
from __future__ import annotations

import re
import sys

__all__ = ["FileCheck"]

_NPOS = 2 ** 64 - 1     # std::string::npos: arithmetic on offsets follows size_t's
_CONTEXT = 3            # lines of context the highlight prints (counting the highlighted one)

CHECK, CHECK_NEXT, CHECK_SAME, CHECK_NOT, CHECK_COUNT, CHECK_DAG, CHECK_SOURCE_HIGHLIGHTED, CHECK_REGEX = range(8)
_KIND_NAMES = {CHECK: "CHECK", CHECK_NEXT: "CHECK-NEXT", CHECK_SAME: "CHECK-SAME", CHECK_NOT: "CHECK-NOT",
               CHECK_DAG: "CHECK-DAG", CHECK_SOURCE_HIGHLIGHTED: "CHECK-SOURCE-HIGHLIGHTED",
               CHECK_REGEX: "CHECK-REGEX"}
# directive suffixes after "CHECK", tried in this order (as PyTorch's parser does)
_DIRECTIVES = ((CHECK, b": "), (CHECK_NEXT, b"-NEXT: "), (CHECK_SAME, b"-SAME: "), (CHECK_NOT, b"-NOT: "),
               (CHECK_DAG, b"-DAG: "), (CHECK_COUNT, b"-COUNT-"),
               (CHECK_SOURCE_HIGHLIGHTED, b"-SOURCE-HIGHLIGHTED: "), (CHECK_REGEX, b"-REGEX: "))


class _Check:
    __slots__ = ("kind", "text", "count")

    def __init__(self, kind, text: bytes, count=None):
        self.kind, self.text, self.count = kind, text, count

    def __str__(self):
        name = f"CHECK-COUNT-{self.count}" if self.kind == CHECK_COUNT else _KIND_NAMES[self.kind]
        return f"{name}: {_decode(self.text)}"


def _decode(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\", ord("'"): "\\'", 7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n",
            13: "\\r", 9: "\\t", 11: "\\v"}


def _quoted(b: bytes) -> str:
    """The C-style quoted form PyTorch's messages show a search string in."""
    out = []
    for c in b:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        elif c >= 0x80:
            out.append(None)        # part of a UTF-8 sequence: kept whole below
        else:
            out.append(f"\\{c:03o}")
    # re-join multi-byte UTF-8 runs as text (PyTorch prints their bytes as octal garbage)
    text, run = [], bytearray()
    for c, piece in zip(b, out):
        if piece is None:
            run.append(c)
            continue
        if run:
            text.append(_decode(bytes(run)))
            run.clear()
        text.append(piece)
    if run:
        text.append(_decode(bytes(run)))
    return '"' + "".join(text) + '"'


def _substr(s: bytes, pos: int, count: int) -> bytes:
    """``std::string::substr``: a negative (wrapped) count means "to the end"."""
    if count < 0 or count >= _NPOS:
        return s[pos:]
    return s[pos:pos + count]


class _Source:
    """The text searched, with its line starts (PyTorch's ``Source``)."""

    def __init__(self, text: bytes):
        self.text = text
        self.size = len(text)
        self.line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == 10]

    def find(self, sub: bytes, start: int) -> int:
        # PyTorch's StringCordView::find: an empty needle is found at 0, wherever the search starts
        if not sub:
            return 0
        if start > self.size or self.size - start < len(sub):
            return _NPOS
        pos = self.text.find(sub, start)
        return _NPOS if pos < 0 else pos

    def find_regex(self, pattern: bytes, start: int) -> int:
        if not pattern:
            return 0
        target = self.text[start:] if start < self.size else b""
        try:
            m = re.search(pattern, target)
        except re.error as e:
            raise RuntimeError(f"FileCheck: invalid regular expression {_quoted(pattern)}: {e}") from None
        return _NPOS if m is None else m.start()     # offset within ``target`` (PyTorch's)

    def lineno_for_offset(self, offset: int) -> int:
        lo, hi = 0, len(self.line_starts)
        while lo < hi:                               # upper_bound(line_starts, offset) - 1
            mid = (lo + hi) // 2
            if self.line_starts[mid] <= offset:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def highlight(self, start: int, end: int) -> bytes:
        """PyTorch's ``SourceRange::highlight``: the lines of [start, end) with ``~`` under the
        range and ``<--- HERE`` after the last run, two lines of context either side (a range
        whose end precedes its start -- PyTorch builds those when a search fails -- prints the
        context without tildes)."""
        s, n = self.text, self.size
        if (end - start) % 2 ** 64 == n:
            return s                                 # the whole text
        out = bytearray()
        range_end = min(n, end)
        begin_line, end_line = start, range_end
        if begin_line > n:
            return b""
        while begin_line > 0 and s[begin_line - 1] != 10:
            begin_line -= 1
        while end_line < n and s[end_line] != 10:
            end_line += 1
        begin_context, seen = begin_line, 0
        while begin_context > 0:
            if s[begin_context - 1] == 10:
                seen += 1
            if seen >= _CONTEXT:
                break
            begin_context -= 1
        end_context, seen = end_line, 0
        while end_context < n:
            if s[end_context] == 10:
                seen += 1
            if seen >= _CONTEXT:
                break
            end_context += 1

        def at(i):       # std::string's operator[]: index size() reads the terminating NUL
            return s[i] if i < n else 0
        out += s[begin_context:start]
        line_start, line_end = start, start
        while line_start < range_end:
            while line_end < n and s[line_end] != 10:
                line_end += 1
            line = _substr(s, line_start, line_end - line_start + 1)
            out += line
            if not line.endswith(b"\n"):
                out += b"\n"
            hl_begin, hl_end = line_start, line_start
            while hl_begin > 0 and s[hl_begin - 1] != 10:
                hl_begin -= 1
            while hl_end < range_end and s[hl_end] != 10:
                hl_end += 1
            empty = 0
            for i in range(hl_begin, hl_end):
                if s[i] == 32 or i < start:
                    empty += 1
                else:
                    break
            tildes = hl_end - hl_begin - empty
            if tildes > 0:
                more_lines = any(at(i) not in (10, 32) for i in range(line_end, range_end + 1))
                out += b" " * empty + b"~" * tildes
                out += b"\n" if (more_lines and line_end != range_end) else b" <--- HERE\n"
            line_end += 1
            line_start = line_end
        if line_end <= n:
            tail = _substr(s, line_end, end_context - line_end)
            out += tail
            if tail and not tail.endswith(b"\n"):
                out += b"\n"
        return bytes(out)


class FileCheck:
    """Chainable text assertions (see the module docstring); every ``check_*`` returns the
    instance and ``run(text)`` (or ``run(checks_text, text)``) raises ``RuntimeError`` at the
    first failing check. An instance never run reports so on stdout when it is collected,
    as PyTorch's does -- a chain without ``.run`` checks nothing."""

    def __init__(self):
        self._checks = []
        self._groups = []
        self._has_run = False

    # ---- building ------------------------------------------------------------------------
    def _add(self, kind, text: bytes, count=None):
        check = _Check(kind, text, count)
        if self._groups and kind in (CHECK_NOT, CHECK_DAG) and self._groups[-1][0].kind == kind:
            self._groups[-1].append(check)
        else:
            self._groups.append([check])
        self._checks.append(check)
        self._has_run = False

    @staticmethod
    def _text_arg(method, value) -> bytes:
        if not isinstance(value, str):
            raise TypeError(f"FileCheck.{method}(): argument 'str' must be str, not {type(value).__name__}")
        return value.encode("utf-8")

    def check(self, str):  # noqa: A002 - PyTorch's parameter name
        """``str`` occurs after the previous match."""
        self._add(CHECK, self._text_arg("check", str))
        return self

    def check_not(self, str):  # noqa: A002
        """``str`` does not occur between the previous match and the next check's match."""
        self._add(CHECK_NOT, self._text_arg("check_not", str))
        return self

    def check_same(self, str):  # noqa: A002
        """``str`` occurs after the previous match, on the same line."""
        self._add(CHECK_SAME, self._text_arg("check_same", str))
        return self

    def check_next(self, str):  # noqa: A002
        """``str`` occurs on the line after the previous match."""
        self._add(CHECK_NEXT, self._text_arg("check_next", str))
        return self

    def check_count(self, str, count, exactly=False):  # noqa: A002
        """``str`` occurs ``count`` times after the previous match (and, with ``exactly``,
        not once more before the next check's match)."""
        text = self._text_arg("check_count", str)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TypeError(f"FileCheck.check_count(): argument 'count' must be a non-negative int, got {count!r}")
        if not isinstance(exactly, bool):
            raise TypeError(f"FileCheck.check_count(): argument 'exactly' must be bool, not {type(exactly).__name__}")
        if count == 0 and not exactly:
            raise RuntimeError("count != 0 || exactly INTERNAL ASSERT FAILED: "
                               "Count == 0 && !exactly doesn't do anything")
        if count:
            self._add(CHECK_COUNT, text, count)
        if exactly:
            self._add(CHECK_NOT, text)
        return self

    def check_dag(self, str):  # noqa: A002
        """``str`` occurs after the previous match; consecutive ``check_dag`` in any order."""
        self._add(CHECK_DAG, self._text_arg("check_dag", str))
        return self

    def check_source_highlighted(self, str):  # noqa: A002
        """``str`` is underlined by ``~`` on the next line (an error message's highlight)."""
        self._add(CHECK_SOURCE_HIGHLIGHTED, self._text_arg("check_source_highlighted", str))
        return self

    def check_regex(self, str):  # noqa: A002
        """The regular expression ``str`` matches after the previous match."""
        self._add(CHECK_REGEX, self._text_arg("check_regex", str))
        return self

    # ---- running -------------------------------------------------------------------------
    def run(self, *args):
        """``run(text)`` or ``run(checks_text, text)``; ``text`` may also be an ``ember.fx``
        Graph or GraphModule (checked against its printed form / generated code)."""
        if len(args) == 1:
            test = self._test_text(args[0])
        elif len(args) == 2:
            if not isinstance(args[0], str):
                raise TypeError("FileCheck.run(): argument 'checks_file' must be str, "
                                f"not {type(args[0]).__name__}")
            test = self._test_text(args[1])
            self._parse_directives(_Source(args[0].encode("utf-8")))
        else:
            raise TypeError(f"FileCheck.run() takes 1 or 2 arguments ({len(args)} given)")
        self._has_run = True
        if not self._groups:
            raise RuntimeError("No checks have been added to this instance ofFilecheck! Check for bad input.")
        self._do_checks(_Source(test))

    @staticmethod
    def _test_text(value) -> bytes:
        if isinstance(value, str):
            return value.encode("utf-8")
        code = getattr(value, "code", None)
        if isinstance(code, str) and hasattr(value, "graph"):     # an fx GraphModule
            return code.encode("utf-8")
        if type(value).__name__ == "Graph" and "fx" in type(value).__module__:
            return str(value).encode("utf-8")
        raise TypeError(f"FileCheck.run(): expected the text to check as a str (or an fx Graph/GraphModule), "
                        f"got {type(value).__name__}")

    def _parse_directives(self, src: _Source):
        start = self._next_directive(src, 0)
        while start != _NPOS:
            start = self._parse_one(src, start)
            start = self._next_directive(src, start)

    @staticmethod
    def _next_directive(src: _Source, prev_end: int) -> int:
        while True:
            start = src.find(b"#", prev_end)
            if start == _NPOS:
                return _NPOS
            start += 1
            i = 0
            while start + i < src.size and i < 6 and src.text[start + i] in (32, 9):
                i += 1
            if src.text[start + i:start + i + 5] == b"CHECK":
                return start + i + 5
            prev_end = start + i + 1

    def _parse_one(self, src: _Source, start: int) -> int:
        for kind, suffix in _DIRECTIVES:
            if src.find(suffix, start) != start:
                continue
            body = start + len(suffix)
            end_line = src.find(b"\n", body)
            count, exactly = None, False
            if kind == CHECK_COUNT:
                if src.find(b"EXACTLY-", body) == body:
                    exactly, body = True, body + len(b"EXACTLY-")
                colon = _assert_find(src, body, end_line, b":", None)
                count = _stoll(src.text[body:colon])
                body = colon + 2
            text = _substr(src.text, body, end_line - body) if end_line != _NPOS else src.text[body:]
            self._add(kind, text, count)
            if exactly:
                self._add(CHECK_NOT, text)
            return end_line
        self._has_run = True
        raise RuntimeError("Could not parse check at:\n" + _decode(src.highlight(start, start + 1))
                           + "Check for bad input.")

    def _do_checks(self, src: _Source):
        prev = (0, 0)
        groups, i = self._groups, 0
        while i < len(groups):
            group = groups[i]
            if group[0].kind != CHECK_NOT:
                prev = self._match_group(group, src, prev)
            elif i + 1 < len(groups):
                after = self._match_group(groups[i + 1], src, prev)
                self._check_nots(group, src, prev[1], after[0])
                prev = after
                i += 1
            else:
                self._check_nots(group, src, prev[1], src.size + 1)
            i += 1

    @staticmethod
    def _check_nots(nots, src, start, end):
        if end < start:
            return
        for check in nots:
            _assert_not_find(src, start, end, check.text, check)

    def _match_group(self, group, src: _Source, prev):
        kind = group[0].kind
        if kind == CHECK_DAG:
            begin, end = _NPOS, 0
            for check in group:
                pos = _assert_find(src, prev[1], src.size, check.text, check)
                begin, end = min(begin, pos), max(end, pos + len(check.text))
            return begin, end
        check = group[0]
        start = end = prev[1]
        if kind == CHECK:
            start = _assert_find(src, start, src.size, check.text, check)
            end = start + len(check.text)
        elif kind == CHECK_SAME:
            pos = _assert_find(src, start, src.size, check.text, check)
            _assert_not_find(src, prev[1], pos, b"\n", check)
            start, end = pos, pos + len(check.text)
        elif kind == CHECK_NEXT:
            line_end = _assert_find(src, start, src.size, b"\n", check)
            pos = _assert_find(src, line_end + 1, src.size, check.text, check)
            _assert_not_find(src, line_end + 1, pos, b"\n", check)
            start, end = pos, pos + len(check.text)
        elif kind == CHECK_COUNT:
            first = _NPOS
            for _ in range(check.count if check.text else 1):
                start = _assert_find(src, start, src.size, check.text, check)
                first = min(first, start)
                end = start + len(check.text)
                start = end
            start = first
        elif kind == CHECK_SOURCE_HIGHLIGHTED:
            _check_highlighted(src, check, start)
        elif kind == CHECK_REGEX:
            start = src.find_regex(check.text, start)
            if start == _NPOS:
                raise RuntimeError(f"Expected to find regex {_quoted(check.text)} but did not find it\n"
                                   f"Searched string:\nFrom {check}\n")
            end = start + len(check.text)
        return start, end

    def __del__(self):
        if not getattr(self, "_has_run", True):
            try:
                sys.stdout.write("You have not run this instance of FileCheck!\nFileCheck checks:\n"
                                 + "".join(f"\t{c}\n" for c in self._checks))
            except Exception:    # interpreter shutdown: stdout may be gone
                pass


def _stoll(b: bytes) -> int:
    """``std::stoll`` as PyTorch's directive parser uses it (leading digits; ValueError /
    IndexError named 'stoll' as pybind11 maps invalid_argument / out_of_range)."""
    m = re.match(rb"\s*[+-]?\d+", b)
    if m is None:
        raise ValueError("stoll")
    value = int(m.group())
    if not -2 ** 63 <= value < 2 ** 63:
        raise IndexError("stoll")
    return value % 2 ** 64        # stored in a size_t


def _assert_find(src: _Source, start: int, end: int, sub: bytes, check) -> int:
    pos = src.find(sub, start)
    if pos == _NPOS or pos + len(sub) > end:
        # PyTorch highlights [start, len(sub)) -- an end, not a length: reproduced as is
        msg = (f"Expected to find {_quoted(sub)} but did not find it\nSearched string:\n"
               + _decode(src.highlight(start, len(sub))))
        if check is not None:
            msg += f"From {check}\n"
        raise RuntimeError(msg)
    return pos


def _assert_not_find(src: _Source, start: int, end: int, sub: bytes, check):
    pos = src.find(sub, start)
    if pos != _NPOS and pos + len(sub) <= end:
        raise RuntimeError(f"Expected to not find {_quoted(sub)} but found it\n"
                           + _decode(src.highlight(pos, pos + len(sub))) + f"From {check}\n")


def _check_highlighted(src: _Source, check: _Check, start_offset: int):
    token = check.text

    def fail(at):
        raise RuntimeError(f"Expected to find {_quoted(token)}highlighted but it is not.\n"
                           + _decode(src.highlight(at, len(token))))

    search_from, found_once, pos = start_offset, False, start_offset
    while pos < src.size:
        pos = src.find(token, search_from)
        if pos == _NPOS:
            break
        found_once = True
        lineno = src.lineno_for_offset(pos)
        col = pos - src.line_starts[lineno]
        if lineno + 1 >= len(src.line_starts):
            fail(pos)
        hl_start = src.line_starts[lineno + 1] + col
        hl_end = min(hl_start + len(token), src.size)
        if hl_end >= src.size:
            fail(pos)
        if all(src.text[i] == 0x7E for i in range(hl_start, hl_end)):
            _assert_not_find(src, hl_start - 1, hl_start, b"~", check)
            _assert_not_find(src, hl_end, hl_end + 1, b"~", check)
            return
        search_from = pos + 1
    if not found_once:
        _assert_find(src, start_offset, src.size, token, check)
    fail(start_offset)
