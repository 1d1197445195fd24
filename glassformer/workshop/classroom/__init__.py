"""A class on one server (``glassformer workshop --class``): the teacher's walk, followed by
every student's page.

    class_state.py    `Classroom`: what the teacher shows (model, text, level, step, stage,
                      zoom, panel, sampling), its version, its last changes, who follows, the
                      students' token, the end
    class_events.py   the server-sent events of one page following the class
    class_links.py    the students' link, as text, as an SVG QR code and in the terminal
    class_routes.py   GET/POST /api/class, GET /api/class/events, POST /api/class/students,
                      POST /api/class/end, GET /api/class/qr.svg
    poll.py           `Poll`: "what comes next?": the model's next-token distribution for the
                      class's text, each client's guess mapped to the model's token, the reveal
    poll_routes.py    POST/GET /api/class/poll, POST /api/class/guess, /api/class/poll/reveal,
                      /api/class/poll/close
    broadcast.py      how the class travels between worker processes: nowhere (one process),
                      or through Redis (``--broadcast redis://host:port``)
    shared_poll.py    the poll kept in Redis, for a class served by several workers

Who may do what (the teacher everything, a student following, the walk, generation, the
views) is the door's: `door/rights.py`, enforced by `door/guard.py`, which also tells the
teacher's token from the students' and names each request's client.
"""
