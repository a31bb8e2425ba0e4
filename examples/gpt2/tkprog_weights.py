"""Moves a .tkprog's weights out and back in, so that a program whose weights are large travels
without them: `strip IN.tkprog OUT.zip` writes every entry but weights.safetensors; `join IN.zip
WEIGHTS.safetensors OUT.tkprog` writes them back with the weights (stored, as the exporter stores
them). The weights must be the ones export used: example_gpt2 --write-weights makes the same
bytes on every machine. Used to run examples/gpt2 on a machine that cannot receive 250 MB.
"""
import sys
import zipfile


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "strip":
        with zipfile.ZipFile(sys.argv[2]) as src, zipfile.ZipFile(sys.argv[3], "w") as dst:
            for info in src.infolist():
                if info.filename != "weights.safetensors":
                    dst.writestr(info, src.read(info.filename))
    elif len(sys.argv) == 5 and sys.argv[1] == "join":
        with zipfile.ZipFile(sys.argv[2]) as src, zipfile.ZipFile(sys.argv[4], "w") as dst:
            for info in src.infolist():
                dst.writestr(info, src.read(info.filename))
                if info.filename == "program.json":
                    dst.write(sys.argv[3], "weights.safetensors", compress_type=zipfile.ZIP_STORED)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
