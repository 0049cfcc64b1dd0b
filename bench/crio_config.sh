#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# crio_config.sh IMAGE IMAGE_REF NAMESPACE ANNOTATION_JSON
# Prints a CRI-O-shaped OCI runtime config.json (the fields and annotation set
# CRI-O 1.2x writes for an application container; about 7 KiB) for one
# container of record IMAGE/IMAGE_REF, presenting ANNOTATION_JSON as the
# pullgate.dev/credentials annotation.
set -eu
image=$1 ref=$2 ns=$3 creds=$4
# JSON-escape the annotation value (it is JSON itself).
esc=$(printf '%s' "$creds" | sed 's/\\/\\\\/g; s/"/\\"/g')
cid=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0
sid=a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90
cat <<JSON
{"ociVersion":"1.0.2-dev",
 "process":{"user":{"uid":0,"gid":0,"additionalGids":[0,1,2,3,4,6,10,11,20,26,27]},
  "args":["/bin/sh","-c","sleep infinity"],
  "env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","TERM=xterm","HOSTNAME=app-7d9f8c6b5-x2x9q","KUBERNETES_SERVICE_PORT=443","KUBERNETES_SERVICE_PORT_HTTPS=443","KUBERNETES_PORT=tcp://10.96.0.1:443","KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443","KUBERNETES_PORT_443_TCP_PROTO=tcp","KUBERNETES_PORT_443_TCP_PORT=443","KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1","KUBERNETES_SERVICE_HOST=10.96.0.1"],
  "cwd":"/",
  "capabilities":{"bounding":["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FSETID","CAP_FOWNER","CAP_SETGID","CAP_SETUID","CAP_SETPCAP","CAP_NET_BIND_SERVICE","CAP_KILL"],"effective":["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FSETID","CAP_FOWNER","CAP_SETGID","CAP_SETUID","CAP_SETPCAP","CAP_NET_BIND_SERVICE","CAP_KILL"],"permitted":["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FSETID","CAP_FOWNER","CAP_SETGID","CAP_SETUID","CAP_SETPCAP","CAP_NET_BIND_SERVICE","CAP_KILL"]},
  "oomScoreAdj":1000,"selinuxLabel":"system_u:system_r:container_t:s0:c123,c456"},
 "root":{"path":"/var/lib/containers/storage/overlay/3c5e5f1a/merged"},
 "hostname":"app-7d9f8c6b5-x2x9q",
 "mounts":[{"destination":"/proc","type":"proc","source":"proc","options":["nosuid","noexec","nodev"]},
  {"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","strictatime","mode=755","size=65536k"]},
  {"destination":"/dev/pts","type":"devpts","source":"devpts","options":["nosuid","noexec","newinstance","ptmxmode=0666","mode=0620","gid=5"]},
  {"destination":"/dev/mqueue","type":"mqueue","source":"mqueue","options":["nosuid","noexec","nodev"]},
  {"destination":"/sys","type":"sysfs","source":"sysfs","options":["nosuid","noexec","nodev","ro"]},
  {"destination":"/sys/fs/cgroup","type":"cgroup","source":"cgroup","options":["nosuid","noexec","nodev","relatime","ro"]},
  {"destination":"/dev/shm","type":"bind","source":"/run/containers/storage/overlay-containers/$sid/userdata/shm","options":["rw","bind"]},
  {"destination":"/etc/resolv.conf","type":"bind","source":"/run/containers/storage/overlay-containers/$sid/userdata/resolv.conf","options":["ro","bind","nodev","nosuid","noexec"]},
  {"destination":"/etc/hostname","type":"bind","source":"/run/containers/storage/overlay-containers/$sid/userdata/hostname","options":["ro","bind","nodev","nosuid","noexec"]},
  {"destination":"/etc/hosts","type":"bind","source":"/var/lib/kubelet/pods/5f0c/etc-hosts","options":["rw","rbind","rprivate","bind"]},
  {"destination":"/dev/termination-log","type":"bind","source":"/var/lib/kubelet/pods/5f0c/containers/app/1a2b","options":["rw","rbind","rprivate","bind"]},
  {"destination":"/var/run/secrets/kubernetes.io/serviceaccount","type":"bind","source":"/var/lib/kubelet/pods/5f0c/volumes/kubernetes.io~projected/kube-api-access-abcde","options":["ro","rbind","rprivate","bind"]}],
 "hooks":{},
 "annotations":{
  "io.container.manager":"cri-o",
  "io.kubernetes.container.hash":"7a3c1f2e",
  "io.kubernetes.container.name":"app",
  "io.kubernetes.container.restartCount":"0",
  "io.kubernetes.container.terminationMessagePath":"/dev/termination-log",
  "io.kubernetes.container.terminationMessagePolicy":"File",
  "io.kubernetes.cri-o.Annotations":"{\"io.kubernetes.container.hash\":\"7a3c1f2e\",\"io.kubernetes.container.restartCount\":\"0\"}",
  "io.kubernetes.cri-o.ContainerID":"$cid",
  "io.kubernetes.cri-o.ContainerType":"container",
  "io.kubernetes.cri-o.Created":"2025-06-01T10:00:00.000000000Z",
  "io.kubernetes.cri-o.IP.0":"10.244.1.23",
  "io.kubernetes.cri-o.Image":"$image",
  "io.kubernetes.cri-o.ImageName":"$image",
  "io.kubernetes.cri-o.ImageRef":"$ref",
  "io.kubernetes.cri-o.Labels":"{\"io.kubernetes.container.name\":\"app\",\"io.kubernetes.pod.name\":\"app-7d9f8c6b5-x2x9q\",\"io.kubernetes.pod.namespace\":\"$ns\",\"io.kubernetes.pod.uid\":\"5f0c1d2e-3f4a-5b6c-7d8e-9f0a1b2c3d4e\"}",
  "io.kubernetes.cri-o.LogPath":"/var/log/pods/${ns}_app-7d9f8c6b5-x2x9q_5f0c/app/0.log",
  "io.kubernetes.cri-o.Metadata":"{\"name\":\"app\"}",
  "io.kubernetes.cri-o.MountPoint":"/var/lib/containers/storage/overlay/3c5e5f1a/merged",
  "io.kubernetes.cri-o.Name":"k8s_app_app-7d9f8c6b5-x2x9q_${ns}_5f0c_0",
  "io.kubernetes.cri-o.ResolvPath":"/run/containers/storage/overlay-containers/$sid/userdata/resolv.conf",
  "io.kubernetes.cri-o.SandboxID":"$sid",
  "io.kubernetes.cri-o.SandboxName":"k8s_app-7d9f8c6b5-x2x9q_${ns}_5f0c_0",
  "io.kubernetes.cri-o.SeccompProfilePath":"RuntimeDefault",
  "io.kubernetes.cri-o.Stdin":"false",
  "io.kubernetes.cri-o.StdinOnce":"false",
  "io.kubernetes.cri-o.TTY":"false",
  "io.kubernetes.cri-o.Volumes":"[{\"container_path\":\"/etc/hosts\",\"host_path\":\"/var/lib/kubelet/pods/5f0c/etc-hosts\",\"readonly\":false}]",
  "io.kubernetes.pod.name":"app-7d9f8c6b5-x2x9q",
  "io.kubernetes.pod.namespace":"$ns",
  "io.kubernetes.pod.terminationGracePeriod":"30",
  "io.kubernetes.pod.uid":"5f0c1d2e-3f4a-5b6c-7d8e-9f0a1b2c3d4e",
  "kubernetes.io/config.seen":"2025-06-01T10:00:00.000000000Z",
  "kubernetes.io/config.source":"api",
  "pullgate.dev/credentials":"$esc"},
 "linux":{"resources":{"devices":[{"allow":false,"access":"rwm"}],"memory":{"limit":268435456,"swap":268435456},"cpu":{"shares":102,"quota":50000,"period":100000},"pids":{"limit":4096}},
  "cgroupsPath":"kubepods-burstable-pod5f0c.slice:crio:$cid",
  "namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/5f0c"},{"type":"ipc","path":"/var/run/ipcns/5f0c"},{"type":"uts","path":"/var/run/utsns/5f0c"},{"type":"mount"}],
  "maskedPaths":["/proc/acpi","/proc/kcore","/proc/keys","/proc/latency_stats","/proc/timer_list","/proc/timer_stats","/proc/sched_debug","/proc/scsi","/sys/firmware","/sys/dev/block"],
  "readonlyPaths":["/proc/asound","/proc/bus","/proc/fs","/proc/irq","/proc/sys","/proc/sysrq-trigger"],
  "seccomp":{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64","SCMP_ARCH_X86","SCMP_ARCH_X32"],"syscalls":[{"names":["accept","accept4","access","bind","brk","capget","capset","chdir","chmod","chown","clock_gettime","clone","close","connect","dup","dup2","dup3","epoll_create1","epoll_ctl","epoll_pwait","execve","exit","exit_group","fchmod","fchown","fcntl","fstat","futex","getdents64","getpid","getppid","getuid","ioctl","kill","listen","lseek","mmap","mprotect","munmap","nanosleep","newfstatat","openat","pipe2","poll","read","readlink","recvfrom","rt_sigaction","rt_sigprocmask","rt_sigreturn","sendto","set_robust_list","set_tid_address","socket","stat","uname","wait4","write"],"action":"SCMP_ACT_ALLOW"}]}}}
JSON
