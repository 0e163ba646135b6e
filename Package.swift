// swift-tools-version:6.0
import PackageDescription

// Layers, top to bottom: executables → services (NodeAgent, Coordinator) → TakeReport (the report page) →
// CoordCore (pure) / CoordWire (protobuf) / TakeDocuments (ASC MHL) → Capture (cameras, microphones) / LibAV (Matroska,
// QuickTime, JPEG) → Pixels (frames, stripe; pure) → C wrappers (ZeroMQ, V4L2, ALSA; FFmpeg inside LibAV).
// No test double reaches `coord` or `coord-node`: the scripted V4L2 driver is linked by tests and coord-node-scripted only.
let package = Package(
    name: "coord",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "coord", targets: ["coord"]),
        .executable(name: "coord-node", targets: ["coord-node"]),
        // Tests only: coord-node with every V4L2 device a scripted webcam (`--v4l2-script FILE`); never packaged.
        .executable(name: "coord-node-scripted", targets: ["coord-node-scripted"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-protobuf", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams", exact: "6.2.2"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", exact: "2.8.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
        // The console's API types, generated from Sources/ConsoleServer/openapi.yaml (scripts/openapi-generate.sh).
        .package(url: "https://github.com/apple/swift-openapi-runtime", exact: "1.13.4"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird", exact: "2.1.0"),
    ],
    targets: [
        // C libraries, each behind a shim.h for what Swift cannot import (function-like macros, variadics).
        .systemLibrary(name: "CZeroMQ", path: "Sources/CZeroMQ", pkgConfig: "libzmq", providers: [.apt(["libzmq3-dev"])]),
        .systemLibrary(name: "CV4L2", path: "Sources/CV4L2", pkgConfig: "libv4l2", providers: [.apt(["libv4l-dev"])]),
        .systemLibrary(name: "CALSA", path: "Sources/CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "CFFmpeg", path: "Sources/CFFmpeg", pkgConfig: "libavformat libavcodec libavutil",
                       providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev", "libavfilter-dev"])]),
        // Aravis: GenICam cameras over GigE Vision and USB3 Vision (its .pc needs libusb-1.0-0-dev and zlib1g-dev too).
        .systemLibrary(name: "CAravis", path: "Sources/CAravis", pkgConfig: "aravis-0.8",
                       providers: [.apt(["libaravis-dev", "libusb-1.0-0-dev", "zlib1g-dev"])]),
        .systemLibrary(name: "CXXHash", path: "Sources/CXXHash", pkgConfig: "libxxhash", providers: [.apt(["libxxhash-dev"])]),
        // The kernel's GPIO v2 character-device uAPI (<linux/gpio.h>, no library): trigger outputs (GPIOLine).
        .systemLibrary(name: "CGPIO", path: "Sources/CGPIO"),

        // One Swift funnel per C library.
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ", "Platform"]),
        // Host clocks, sleeping to an instant, eventfd wake-ups, file checksums (SHA-256, and xxh128 through libxxhash).
        .target(name: "Platform", dependencies: ["CXXHash", "CGPIO", .product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "V4L2", dependencies: ["CV4L2"]),
        // A V4L2 driver in Swift for machines without cameras (tests and `coord-node-scripted --v4l2-script`).
        .target(name: "V4L2Simulator", dependencies: ["V4L2", "CV4L2", "CoordCore", "Platform"]),

        // Pure domain: no sockets, files, clocks or C.
        .target(name: "CoordCore"),
        // Generated protobuf plus conversions to and from core types.
        .target(name: "CoordWire", dependencies: [
            "CoordCore", .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        ]),
        // Versioned YAML files (rig file, node file): one reader, one kind of error sentence.
        .target(name: "VersionedYAML", dependencies: ["CoordCore", "Platform", .product(name: "Yams", package: "Yams")]),
        // Planar frames, pixel packing, the test pattern and the SYNCSTRIPE painter/decoder (pure: no C, no devices).
        .target(name: "Pixels"),
        // The libav funnel (the one module importing CFFmpeg): Matroska writers and repair, QuickTime/WAV export,
        // JPEG encoding, the headroom file.
        .target(name: "LibAV", dependencies: ["CFFmpeg", "Pixels", "Platform", "CoordCore"]),
        // Camera and microphone sources: CameraSource/AudioSource, the synthetic sensor, V4L2 cameras, ALSA microphones.
        .target(name: "Capture", dependencies: ["CALSA", "V4L2", "CV4L2", "Pixels", "Platform", "CoordCore"]),
        // Tests only: V4L2 access through the scripted driver, painting the test pattern and the stripe.
        .target(name: "ScriptedCameras", dependencies: ["Capture", "CoordCore", "LibAV", "Pixels", "Platform", "V4L2", "V4L2Simulator"]),

        // Machine-vision cameras through Aravis (GenICamCamera, the one funnel) and their pure pieces.
        .target(name: "GenICam", dependencies: ["CAravis", "Capture", "Pixels", "CoordCore", "Platform"]),
        // libcamera (Raspberry Pi cameras, UVC through libcamera): a C++ funnel with a C API (include/clibcamera.h),
        // libcamera's headers from Debian's libcamera-dev (pkg-config libcamera: /usr/include/libcamera), and the source.
        .target(name: "CLibcamera", cxxSettings: [.unsafeFlags(["-std=c++17", "-I/usr/include/libcamera"])],
                linkerSettings: [.linkedLibrary("camera"), .linkedLibrary("camera-base")]),
        .target(name: "Libcamera", dependencies: ["CLibcamera", "Capture", "Pixels", "CoordCore", "Platform"]),

        // sync-report.html: the SVG plots and the page, rendered from a Mustache template (pure, like CoordCore).
        .target(name: "TakeReport", dependencies: ["CoordCore", .product(name: "Mustache", package: "swift-mustache")]),

        // Prometheus exposition for a node or a rig (CONTRACT §7), from NodeMetricsSample values.
        .target(name: "RigMetrics", dependencies: ["CoordCore", .product(name: "Prometheus", package: "swift-prometheus")]),

        // What coord writes beside a take and reads back (pure): ASC MHL (xxh128 from Platform) and the JSON field
        // problem sentences of a manifest that does not decode.
        .target(name: "TakeDocuments", dependencies: ["CoordCore", "Platform", .product(name: "Crypto", package: "swift-crypto")]),
        // The hand-off to post-production (CONTRACT §10), for `coord deliver` alone: FCPXML, FCP 7 XML and the deliver
        // plan (pure), the QuickTime/BWAV writer (LibAV).
        .target(name: "Deliverables", dependencies: ["CoordCore", "LibAV", "Platform", "TakeDocuments"]),

        // I/O shells.
        .target(name: "NodeAgent", dependencies: [
            "CoordCore", "CoordWire", "Capture", "LibAV", "Pixels", "GenICam", "Libcamera", "ZeroMQ", "Platform", "VersionedYAML",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Coordinator", dependencies: [
            // TakeDocuments: the ASC MHL generation every collection adds.
            "CoordCore", "CoordWire", "ZeroMQ", "Platform", "TakeReport", "TakeDocuments",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Crypto", package: "swift-crypto"),
            // Rig files (RigFile.swift).
            "VersionedYAML",
            // A shot's stills, kept from the span's lossless video (SnapSession.swift).
            "LibAV",
        ]),

        // The live console: the page, its JSON API and WebSocket over a LiveRig (Hummingbird 2).
        .target(name: "ConsoleServer", dependencies: [
            "Coordinator", "CoordCore", "RigMetrics",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            // --tls-cert/--tls-key (swift-nio-ssl).
            .product(name: "HummingbirdTLS", package: "hummingbird"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
            // The console's take service, and SIGINT/SIGTERM: the first stops and collects the take, a second abandons it.
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ], exclude: ["openapi.yaml", "openapi-generator-config.yaml"]),

        // Thin executables.
        // coord's commands, in a library tests can call.
        .target(name: "CoordCommands", dependencies: [
            "Coordinator", "CoordCore", "Platform", "TakeReport", "ConsoleServer", "ZeroMQ", "TakeDocuments",
            // `coord deliver` alone.
            "Deliverables",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            // Ctrl-C and SIGTERM during a take (handleInterrupts).
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ]),
        .executableTarget(name: "coord", dependencies: ["CoordCommands"]),
        // coord-node's commands, in a library tests can call.
        .target(name: "NodeCommands", dependencies: [
            "NodeAgent", "Capture", "Pixels", "Platform", "RigMetrics", "ZeroMQ",
            // --metrics: /metrics over HTTP.
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ]),
        .executableTarget(name: "coord-node", dependencies: ["NodeCommands"]),
        // Tests only: coord-node's commands with V4L2 reached through the scripted driver (`--v4l2-script FILE`).
        .executableTarget(name: "coord-node-scripted", dependencies: ["CoordCore", "NodeCommands", "Platform", "ScriptedCameras"]),
        // Fuzzing (libFuzzer with -sanitize=fuzzer -DFUZZING; built normally it replays a corpus): docs/tests.md.
        .executableTarget(name: "coord-fuzz", dependencies: [
            "CoordCore", "CoordWire", "Coordinator", "NodeAgent",
            .product(name: "Logging", package: "swift-log"),
        ]),

        .testTarget(name: "CoordCoreTests", dependencies: ["CoordCore"]),
        // coord's argument parsing and error rendering, without a process.
        .testTarget(name: "CoordCommandsTests", dependencies: ["CoordCommands", "Coordinator", "CoordCore",
                                                                .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        .testTarget(name: "DeliverablesTests", dependencies: ["Deliverables", "TakeDocuments", "CoordCore", "Platform"]),
        .testTarget(name: "TakeReportTests", dependencies: ["TakeReport", "CoordCore"]),
        .testTarget(name: "RigMetricsTests", dependencies: ["RigMetrics", "CoordCore"]),
        // The console's gate (CONTRACT §6b): Host, Origin, token and JSON-only decisions.
        .testTarget(name: "ConsoleServerTests", dependencies: [
            "ConsoleServer", "Coordinator", "CoordCore", "ZeroMQ", .product(name: "HummingbirdTesting", package: "hummingbird"),
        ]),
        // V4L2: the camera tests drive V4L2Camera through the scripted driver.
        .testTarget(name: "MediaTests", dependencies: ["Capture", "LibAV", "Pixels", "ScriptedCameras", "V4L2", "V4L2Simulator", "CoordCore"]),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ", "CoordWire", "Platform"]),
        .testTarget(name: "GenICamTests", dependencies: ["GenICam", "Capture", "Pixels", "CoordCore"]),
        .testTarget(name: "V4L2Tests", dependencies: ["V4L2", "V4L2Simulator"]),
        // The POSIX funnel: EINTR retried, errno rendered as one sentence.
        .testTarget(name: "PlatformTests", dependencies: ["Platform"]),
        // coord-node's flags, resolve and buildNode, without a process.
        .testTarget(name: "NodeCommandsTests", dependencies: ["NodeCommands", "NodeAgent", "CoordCore",
                                                             .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                                             .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "EndToEndTests", dependencies: [
            // ScriptedCameras: V4L2Access.scripted stands in for the cameras a node is configured with.
            "Coordinator", "CoordCore", "CoordWire", "Capture", "ScriptedCameras", "NodeAgent", "ZeroMQ", "Platform", "TakeReport", .product(name: "Logging", package: "swift-log"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
