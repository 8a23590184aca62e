"""What a job tells while it runs, shown as the command line shows it: results and epochs as lines
on standard output, notes on standard error, the status and progress bar as one line that is
rewritten (a carriage return, which terminals and notebooks both honour)."""
import sys


class Progress:
    """Renders a job's events. verbose 0: notes only; 1: everything."""

    def __init__(self, verbose=1, callbacks=()):
        self.verbose = verbose
        self.callbacks = list(callbacks)
        self._line = 0  # the width of the status line now shown (0: none)

    def _clear(self):
        if self._line:
            sys.stdout.write("\r" + " " * self._line + "\r")
            sys.stdout.flush()
            self._line = 0

    def _status(self, text):
        text = text[:120]
        sys.stdout.write("\r" + text + " " * max(0, self._line - len(text)))
        sys.stdout.flush()
        self._line = len(text)

    def __call__(self, kind, payload):
        if kind == "note":
            self._clear()
            print(payload, file=sys.stderr)
        elif kind == "epoch":
            for callback in self.callbacks:
                _call_epoch_end(callback, payload)
            if self.verbose:
                self._clear()
                sys.stdout.write(payload["line"])
                sys.stdout.flush()
        elif not self.verbose:
            return
        elif kind == "result":
            self._clear()
            sys.stdout.write(payload)
            sys.stdout.flush()
        elif kind == "status":
            self._status(payload)
        elif kind == "bar":
            fraction, text = payload
            filled = int(round(20 * max(0.0, min(1.0, fraction))))
            self._status(f"[{'#' * filled}{'.' * (20 - filled)}] {fraction:4.0%} {text}")
        elif kind == "clear":
            self._clear()

    def close(self):
        self._clear()


def _call_epoch_end(callback, record):
    """Keras's callback protocol (on_epoch_end(epoch, logs), epoch counted from 0) or a plain
    callable taking the same two arguments."""
    logs = {k: v for k, v in record.items() if k not in ("line", "epochs")}
    hook = getattr(callback, "on_epoch_end", None)
    if hook is not None:
        hook(record["epoch"] - 1, logs)
    elif callable(callback):
        callback(record["epoch"] - 1, logs)
    else:
        raise TypeError(f"callbacks: {callback!r} has no on_epoch_end(epoch, logs) and is not "
                        "callable")
