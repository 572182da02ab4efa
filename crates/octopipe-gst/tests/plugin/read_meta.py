"""Reads octopipe's objects from a pipeline's buffers with PyGObject, as docs/gstreamer.md shows:
one line per object, `frame x y w h label class track`. Run by the plugin's tests (roi.rs):
python3 read_meta.py 'PIPELINE ... ! fakesink name=sink' CLASSIFIER_NAME"""
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstVideo", "1.0")
from gi.repository import Gst, GstVideo  # noqa: E402

Gst.init(None)
pipeline = Gst.parse_launch(sys.argv[1])
classifier = sys.argv[2]
frames = [0]


def on_buffer(pad, info):
    buf = info.get_buffer()
    i = 0
    while (roi := GstVideo.buffer_get_video_region_of_interest_meta_id(buf, i)) is not None:
        det, cls, track = (roi.get_param(n) for n in ("detection", classifier, "object_id"))
        print(frames[0], roi.x, roi.y, roi.w, roi.h,
              det and det.get_value("label"), cls and cls.get_value("label"),
              track and track.get_value("id"))
        i += 1
    frames[0] += 1
    return Gst.PadProbeReturn.OK


pipeline.get_by_name("sink").get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, on_buffer)
pipeline.set_state(Gst.State.PLAYING)
msg = pipeline.get_bus().timed_pop_filtered(Gst.CLOCK_TIME_NONE, Gst.MessageType.EOS | Gst.MessageType.ERROR)
pipeline.set_state(Gst.State.NULL)
if msg.type == Gst.MessageType.ERROR:
    print(msg.parse_error(), file=sys.stderr)
    sys.exit(1)
