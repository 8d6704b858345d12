"""A browser for tests: ``BROWSER="python tests/fake_browser.py %s"``.

It does what a user's browser does when the user consents: it opens the
authorization URL, follows the redirect it answers with (to the client's listener
on 127.0.0.1), and records each URL it was given in ``$FAKE_BROWSER_LOG``.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


class _Stop(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the redirect is followed by hand below


def main(url: str) -> None:
    with open(os.environ["FAKE_BROWSER_LOG"], "a", encoding="utf-8") as log:
        log.write(url + "\n")
    try:
        urllib.request.build_opener(_Stop).open(url, timeout=10)
    except urllib.error.HTTPError as error:
        location = error.headers["Location"]
    else:
        raise SystemExit("the authorization server did not redirect")
    with urllib.request.urlopen(location, timeout=10) as page:
        page.read()


if __name__ == "__main__":
    main(sys.argv[1])
