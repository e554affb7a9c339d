#!/usr/bin/env python3
"""Checks that a screenshot of the HTML report is not blank: enough ink, spread down the page, and
coloured chart pixels (lines, bars), not only text. Standard library only (zlib), as CI has no pip.
Usage: png_coverage.py SHOT.png  -> exit 0 when the page is covered, 1 otherwise."""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {color})")
    raw, stride = zlib.decompress(idat), width * channels
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):  # undo the row filter (PNG spec 9.2)
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def main():
    width, height, channels, rows = read_png(sys.argv[1])
    ink = coloured = inked_rows = 0
    for line in rows:
        row_ink = 0
        for x in range(0, width * channels, channels):
            r, g, b = line[x], line[x + 1], line[x + 2]
            if min(r, g, b) < 235:
                row_ink += 1
                if max(r, g, b) - min(r, g, b) > 60:
                    coloured += 1
        ink += row_ink
        inked_rows += row_ink > 0
    total = width * height
    print(f"{width}x{height}: ink {ink / total:.1%}, coloured {coloured / total:.2%}, "
          f"rows with ink {inked_rows / height:.0%}")
    ok = ink / total >= 0.02 and coloured / total >= 0.003 and inked_rows / height >= 0.6
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
