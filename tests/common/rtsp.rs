//! An RTSP server inside the test process (gstreamer-rtsp-server, a dev-dependency): a live
//! H.264 test stream on 127.0.0.1, stopped and started again by the test.

use gstreamer as gst;

/// An RTSP server on 127.0.0.1:`port` serving a live H.264 test stream at `/test`, on a GLib
/// main loop of its own.
pub struct RtspServer {
    context: gst::glib::MainContext,
    main_loop: gst::glib::MainLoop,
    server: gstreamer_rtsp_server::RTSPServer,
    source: Option<gst::glib::SourceId>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RtspServer {
    pub fn start(port: u16) -> RtspServer {
        use gstreamer_rtsp_server::prelude::*;
        gst::init().unwrap();
        let context = gst::glib::MainContext::new();
        let server = gstreamer_rtsp_server::RTSPServer::new();
        server.set_address("127.0.0.1");
        server.set_service(&port.to_string());
        let factory = gstreamer_rtsp_server::RTSPMediaFactory::new();
        factory.set_launch(
            "( videotestsrc is-live=true pattern=ball ! video/x-raw,width=160,height=120,framerate=30/1 \
             ! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=10 \
             ! rtph264pay name=pay0 pt=96 config-interval=1 )",
        );
        factory.set_shared(true);
        server.mount_points().unwrap().add_factory("/test", factory);
        let source = server.attach(Some(&context)).unwrap();
        let main_loop = gst::glib::MainLoop::new(Some(&context), false);
        let running = main_loop.clone();
        let thread = std::thread::spawn(move || running.run());
        RtspServer {
            context,
            main_loop,
            server,
            source: Some(source),
            thread: Some(thread),
        }
    }

    /// Close every client connection and the listening socket.
    pub fn stop(mut self) {
        self.close();
    }

    fn close(&mut self) {
        use gstreamer_rtsp_server::prelude::*;
        self.server.client_filter(Some(&mut |_, _| {
            gstreamer_rtsp_server::RTSPFilterResult::Remove
        }));
        if let Some(source) = self
            .source
            .take()
            .and_then(|id| self.context.find_source_by_id(&id))
        {
            source.destroy();
        }
        self.main_loop.quit();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for RtspServer {
    fn drop(&mut self) {
        self.close();
    }
}
