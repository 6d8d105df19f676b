%% Erlang distribution peer: message round trips between processes on two
%% nodes of one machine, one "<name> <ns per op>" line each.
%%   erl -sname B -setcookie C -noshell -pa DIR          (the serving node)
%%   erl -sname A -setcookie C -noshell -pa DIR -run dist main N B -s init stop
%%
%%   dist_null    a round trip to a process on node B: an atom each way
%%   dist_str100  a 100-character string there, its length back
%%
%%   erl ... -run dist scale N C B1 [B2 ...] -s init stop
%%   dist_scale   C client processes each make N null round trips to a
%%                server process on one of the nodes B1.. (client i uses
%%                node i mod K); calls per second over all of them
%% Each measure runs twice and reports the second run.
-module(dist).
-export([main/1, scale/1]).
%% The server, the timing and the call loop are ipc.erl's.

main([NArg, Peer]) ->
    N = list_to_integer(NArg),
    [_, Host] = string:split(atom_to_list(node()), "@"),
    PeerNode = list_to_atom(Peer ++ "@" ++ Host),
    pong = wait_for(PeerNode, 400),
    Server = spawn(PeerNode, ipc, serve, []),
    Str = lists:duplicate(100, $x),
    ipc:time(dist_null, N, fun(K) -> ipc:call_loop(Server, ping, K) end),
    ipc:time(dist_str100, N, fun(K) -> ipc:call_loop(Server, Str, K) end),
    exit(Server, kill).

scale([NArg, CArg | Peers]) ->
    N = list_to_integer(NArg),
    C = list_to_integer(CArg),
    [_, Host] = string:split(atom_to_list(node()), "@"),
    Nodes = [list_to_atom(P ++ "@" ++ Host) || P <- Peers],
    [pong = wait_for(Node, 400) || Node <- Nodes],
    Servers = list_to_tuple([spawn(Node, ipc, serve, []) || Node <- Nodes]),
    Run = fun() ->
        Self = self(),
        T0 = erlang:monotonic_time(nanosecond),
        [spawn(fun() ->
             ipc:call_loop(element(I rem tuple_size(Servers) + 1, Servers), ping, N),
             Self ! done
         end) || I <- lists:seq(0, C - 1)],
        [receive done -> ok end || _ <- lists:seq(1, C)],
        erlang:monotonic_time(nanosecond) - T0
    end,
    Run(),
    Ns = Run(),
    io:format("dist_scale ~.2f~n", [C * N / (Ns / 1.0e9)]),
    [exit(S, kill) || S <- tuple_to_list(Servers)].

wait_for(Node, 0) -> net_adm:ping(Node);
wait_for(Node, K) ->
    case net_adm:ping(Node) of
        pong -> pong;
        pang -> timer:sleep(50), wait_for(Node, K - 1)
    end.
