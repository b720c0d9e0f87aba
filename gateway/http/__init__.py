"""The gateway's HTTP face: the server and its limits, access, the handlers, health and the page."""
