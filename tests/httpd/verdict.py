# verdict.py -- the PASS/FAIL line the tests/httpd/ check scripts print,
# one per check, which check-httpd.sh's py_checks counts.


def verdict(ok, name, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok or not why else ": " + why), flush=True)


def check(name, fn):
    try:
        ok, why = fn()
    except Exception as e:  # a check that throws failed
        ok, why = False, repr(e)
    verdict(ok, name, why)
