"""A GGUF reader for the tests, independent of toy's C reader: the metadata as Python
values (strings as bytes), and each tensor's dimensions, type and absolute byte offset
in the file (GGUF's ne order: fastest-varying first)."""
import struct

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class GGUF:
    def __init__(self, path):
        self.path = path
        self.data = data = open(path, "rb").read()
        if data[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 4
        self.version = self._take("I")
        n_tensors, n_kv = self._take("Q"), self._take("Q")
        self.kv = {}
        for _ in range(n_kv):
            key = self._string().decode()
            self.kv[key] = self._value(self._take("I"))
        infos = []
        for _ in range(n_tensors):
            name = self._string().decode()
            ne = [self._take("Q") for _ in range(self._take("I"))]
            infos.append((name, ne, self._take("I"), self._take("Q")))
        align = self.kv.get("general.alignment", 32)
        start = (self.pos + align - 1) // align * align
        self.tensors = {name: (ne, typ, start + off) for name, ne, typ, off in infos}

    def _take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0]

    def _string(self):
        n = self._take("Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def _value(self, t):
        if t == 8:
            return self._string()
        if t == 9:
            et, n = self._take("I"), self._take("Q")
            return [self._value(et) for _ in range(n)]
        return self._take(_SCALARS[t])
