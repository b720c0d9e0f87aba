"""The fixed vocabulary of refusal and failure reasons (SPEC section 7).

The same words are used by the gRPC API (as an enum), the command line, the fetch log
and the metrics' ``reason`` label, so every consumer can match on them.
"""

from __future__ import annotations

import enum


class Reason(enum.StrEnum):
    """Why an address was refused or a page could not be read."""

    SCHEME = "scheme"  # not https (http is upgraded, everything else is refused)
    PORT = "port"  # a port other than 443
    USERINFO = "userinfo"  # a user name or password in the address
    MALFORMED = "malformed"  # not a well-formed address, or a parser trick
    NOT_IN_ANSWER = "not_in_answer"  # rule 1: host not among this answer's allowed hosts
    NOT_PUBLIC = "not_public"  # rule 2: an address that is not globally reachable
    DNS = "dns"  # the name did not resolve
    CONNECT = "connect"  # no TCP connection, or it broke
    TLS = "tls"  # TLS handshake or certificate check failed
    TIMEOUT = "timeout"  # the page (or the crawl, or its reader) ran out of time
    TOO_LARGE = "too_large"  # more than the body limit, or than a reader's memory limit
    CONTENT_TYPE = "content_type"  # not text/html, text/plain, text/markdown or application/pdf
    HTTP_STATUS = "http_status"  # a status that is neither success nor a redirect
    REDIRECTS = "redirects"  # more redirects than allowed
    INTERNAL = "internal"  # the fetcher failed on this page (a bug, logged); never the web
    # A document that came whole but holds no text that can be read: a PDF without a text
    # layer, with a password, truncated, damaged, or one its reader failed on.
    UNREADABLE = "unreadable"
    DENIED = "denied"  # the operator's deny_domains / allow_domains (SPEC 7 step 2)
