// Bulk-stimulus harness around systolica_tile: the testbench hands whole programs to the
// simulation as memory files, so Python wakes once per program instead of once per cycle.
//
// Plusargs (all set by systolica.tb.bulk):
//   +commands=<hex file>   +c_count=<beats>   command beats, one payload per line
//   +stationary=<hex file> +s_count=<beats>   stationary beats
//   +moving=<hex file>     +m_count=<beats>   moving beats
//   +r_count=<beats>                          result beats expected (then the run is done)
//   +results=<file> +rstamps=<file> +mstamps=<file> +cstamps=<file>
//                                             written once every result and command is in
//   +seed=<n> +idle=<0..255> +bp=<0..255>     per-cycle idle / backpressure probability x 256
// The stream drivers keep valid high until a beat is taken (the stream protocol); idle and
// backpressure come from xorshift32 generators seeded by +seed, so a run is reproducible.
`default_nettype none
module systolica_harness #(
    parameter integer ROWS = 8,
    parameter integer COLS = 8,
    parameter integer DEPTH = 4096,
    parameter integer CW = 77,          // command_layout().size
    parameter integer LW = 16,          // operand lane width (32 with TF32 / FP32 or MX)
    parameter integer SW = 8 * 16,      // stationary_layout(COLS, LW, mx).size (lanes, scales)
    parameter integer MW = 8 * 16 + 2,  // moving_layout(ROWS, LW, mx).size (lanes, row cells,
                                        // scales)
    parameter integer RW = 8 * 32 + 4   // result_layout(COLS).size (lanes, cells, last)
) (
    input  wire clk,
    input  wire rst,
    output reg  done = 1'b0,
    output reg  dumped = 1'b0,
    output reg  [31:0] cycle = 32'd0,
    output reg  [31:0] c_sent = 32'd0,
    output reg  [31:0] s_sent = 32'd0,
    output reg  [31:0] m_sent = 32'd0,
    output reg  [31:0] r_received = 32'd0,
    output wire [15:0] rejected,
    output wire [4:0]  error
);

    reg [CW-1:0] c_mem [0:DEPTH-1];
    reg [31:0]   c_stamp [0:DEPTH-1];
    reg [SW-1:0] s_mem [0:DEPTH-1];
    reg [MW-1:0] m_mem [0:DEPTH-1];
    reg [RW-1:0] r_mem [0:DEPTH-1];
    reg [31:0]   r_stamp [0:DEPTH-1];
    reg [31:0]   m_stamp [0:DEPTH-1];

    reg [31:0] c_count = 32'd0, r_count = 32'd0;
    reg [31:0] s_count = 32'd0, m_count = 32'd0, seed = 32'd1, idle = 32'd0, bp = 32'd0;
    reg [8*512-1:0] path;   // file names up to 512 characters

    initial begin
        if ($value$plusargs("c_count=%d", c_count) == 0) c_count = 0;
        if ($value$plusargs("r_count=%d", r_count) == 0) r_count = 0;
        if ($value$plusargs("s_count=%d", s_count) == 0) s_count = 0;
        if ($value$plusargs("m_count=%d", m_count) == 0) m_count = 0;
        if ($value$plusargs("seed=%d", seed) == 0 || seed == 0) seed = 1;
        if ($value$plusargs("idle=%d", idle) == 0) idle = 0;
        if ($value$plusargs("bp=%d", bp) == 0) bp = 0;
        if ($value$plusargs("commands=%s", path)) $readmemh(path, c_mem);
        if ($value$plusargs("stationary=%s", path)) $readmemh(path, s_mem);
        if ($value$plusargs("moving=%s", path)) $readmemh(path, m_mem);
    end

    // xorshift32 generators, one per stream, advanced every cycle.
    reg [31:0] rng_c, rng_s, rng_m, rng_r;
    initial begin
        rng_c = 32'h27D4EB2F; rng_s = 32'h9E3779B9; rng_m = 32'h85EBCA6B; rng_r = 32'hC2B2AE35;
    end
    function [31:0] xorshift(input [31:0] x);
        reg [31:0] y;
        begin
            y = x ^ (x << 13);
            y = y ^ (y >> 17);
            xorshift = y ^ (y << 5);
        end
    endfunction

    wire c_ready, s_ready, m_ready, r_valid;
    wire [RW-1:0] r_payload;
    reg c_valid = 1'b0, s_valid = 1'b0, m_valid = 1'b0, r_ready = 1'b0;

    // The tile and the drivers reset from a register, not from the top-level input: logic
    // that depends combinationally on a top-level input is evaluated again in Verilator's
    // input-combinational region on every eval() call (twice a clock cycle), and every
    // flip-flop's next-state mux reads the reset, which pulled each PE's whole datapath in.
    reg rst_q = 1'b1;
    always @(posedge clk) rst_q <= rst;

    systolica_tile tile (
        .clk(clk), .rst(rst_q),
        .command__payload(c_mem[c_sent[$clog2(DEPTH)-1:0]]),
        .command__valid(c_valid), .command__ready(c_ready),
        .stationary__payload(s_mem[s_sent[$clog2(DEPTH)-1:0]]),
        .stationary__valid(s_valid), .stationary__ready(s_ready),
        .moving__payload(m_mem[m_sent[$clog2(DEPTH)-1:0]]),
        .moving__valid(m_valid), .moving__ready(m_ready),
        .result__payload(r_payload), .result__valid(r_valid), .result__ready(r_ready),
        .status(status)
    );
    wire [20:0] status;                 // status_layout(): rejected [15:0], error [20:16]
    assign rejected = status[15:0];
    assign error = status[20:16];

    reg seeded = 1'b0;
    always @(posedge clk) begin
        if (rst_q) begin
            cycle <= 0; c_sent <= 0; s_sent <= 0; m_sent <= 0; r_received <= 0;
            c_valid <= 1'b0; s_valid <= 1'b0; m_valid <= 1'b0; r_ready <= 1'b0; done <= 1'b0;
            if (!seeded) begin
                rng_c <= rng_c ^ (seed * 32'd31); rng_s <= rng_s ^ seed; rng_m <= rng_m ^ (seed * 32'd7919);
                rng_r <= rng_r ^ (seed * 32'd104729); seeded <= 1'b1;
            end
        end else begin
            cycle <= cycle + 1;
            rng_c <= xorshift(rng_c); rng_s <= xorshift(rng_s);
            rng_m <= xorshift(rng_m); rng_r <= xorshift(rng_r);
            // Command driver, with the cycle each command is taken.
            if (c_valid && c_ready) begin
                c_stamp[c_sent[$clog2(DEPTH)-1:0]] <= cycle;
                c_sent <= c_sent + 1;
                c_valid <= (c_sent + 1 < c_count) && (rng_c[7:0] >= idle[7:0]);
            end else if (!c_valid) begin
                c_valid <= (c_sent < c_count) && (rng_c[7:0] >= idle[7:0]);
            end
            // Stationary driver.
            if (s_valid && s_ready) begin
                s_sent <= s_sent + 1;
                s_valid <= (s_sent + 1 < s_count) && (rng_s[7:0] >= idle[7:0]);
            end else if (!s_valid) begin
                s_valid <= (s_sent < s_count) && (rng_s[7:0] >= idle[7:0]);
            end
            // Moving driver, with the cycle each beat is taken.
            if (m_valid && m_ready) begin
                m_stamp[m_sent[$clog2(DEPTH)-1:0]] <= cycle;
                m_sent <= m_sent + 1;
                m_valid <= (m_sent + 1 < m_count) && (rng_m[7:0] >= idle[7:0]);
            end else if (!m_valid) begin
                m_valid <= (m_sent < m_count) && (rng_m[7:0] >= idle[7:0]);
            end
            // Result monitor: capture every beat with its cycle.
            if (r_valid && r_ready) begin
                r_mem[r_received[$clog2(DEPTH)-1:0]] <= r_payload;
                r_stamp[r_received[$clog2(DEPTH)-1:0]] <= cycle;
                r_received <= r_received + 1;
            end
            r_ready <= rng_r[7:0] >= bp[7:0];
            done <= (r_received + ((r_valid && r_ready) ? 1 : 0)) >= r_count
                    && (c_sent + ((c_valid && c_ready) ? 1 : 0)) >= c_count;
        end
    end

    always @(posedge clk) begin
        if (done && !dumped) begin
            if ($value$plusargs("results=%s", path) && r_count > 0)
                $writememh(path, r_mem, 0, r_count - 1);
            if ($value$plusargs("rstamps=%s", path) && r_count > 0)
                $writememh(path, r_stamp, 0, r_count - 1);
            if ($value$plusargs("mstamps=%s", path) && m_count > 0)
                $writememh(path, m_stamp, 0, m_count - 1);
            if ($value$plusargs("cstamps=%s", path) && c_count > 0)
                $writememh(path, c_stamp, 0, c_count - 1);
            dumped <= 1'b1;
        end
    end
endmodule
`default_nettype wire
